//go:build !unix

package cli

import (
	"os/exec"
	"time"
)

const waitDelay = 2 * time.Second

func isolate(cmd *exec.Cmd) { cmd.WaitDelay = waitDelay }

func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
