//go:build unix && !linux

package cli

import "syscall"

func setDeathSignal(*syscall.SysProcAttr) {}
