//go:build unix && !linux

package upstream

import "syscall"

// setDeathSignal has no portable equivalent outside Linux.
func setDeathSignal(*syscall.SysProcAttr) {}
