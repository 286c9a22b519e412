//go:build !unix

package upstream

import "os/exec"

// isolateProcess is a no-op where process groups are not available.
func isolateProcess(*exec.Cmd) {}

// killProcessGroup is a no-op where process groups are not available.
func killProcessGroup(int) {}
