//go:build unix

package upstream

import (
	"os/exec"
	"syscall"
)

// isolateProcess puts the child in its own process group, so that the
// whole tree a launcher such as npx starts can be killed after the session.
func isolateProcess(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
}

// killProcessGroup kills whatever is left of the child's process group.
// The leader itself has already been reaped by the go-sdk transport.
func killProcessGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // ESRCH when the group is empty
	}
}
