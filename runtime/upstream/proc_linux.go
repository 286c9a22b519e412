//go:build linux

package upstream

import "syscall"

// setDeathSignal makes the kernel kill the child when the gateway dies
// without a chance to clean up (kill -9): Node servers ignore the stdin
// close that would otherwise end them.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
