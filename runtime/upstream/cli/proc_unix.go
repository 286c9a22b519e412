//go:build unix

package cli

import (
	"os/exec"
	"syscall"
	"time"
)

// waitDelay bounds how long Wait waits for output pipes after the
// command is gone (a grandchild may still hold them).
const waitDelay = 2 * time.Second

// isolate puts the command in its own process group, so that a timeout
// kills everything it started.
func isolate(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
	cmd.WaitDelay = waitDelay
}

// kill kills the command's process group.
func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
}
