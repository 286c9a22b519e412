//go:build linux

package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// setLimits applies l to the current process (soft = hard), so that they
// are inherited by everything it execs and cannot be raised again.
func setLimits(l helperLimits) error {
	for _, r := range []struct {
		name string
		res  int
		v    int64
	}{
		{"memory (RLIMIT_DATA)", unix.RLIMIT_DATA, l.Data},
		{"processes (RLIMIT_NPROC)", unix.RLIMIT_NPROC, l.NProc},
		{"open files (RLIMIT_NOFILE)", unix.RLIMIT_NOFILE, l.NoFile},
		{"cpu time (RLIMIT_CPU)", unix.RLIMIT_CPU, l.CPUSeconds},
	} {
		if r.v <= 0 {
			continue
		}
		lim := unix.Rlimit{Cur: uint64(r.v), Max: uint64(r.v)}
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err == nil && cur.Max < lim.Max {
			lim = unix.Rlimit{Cur: cur.Max, Max: cur.Max} // never raise
		}
		if err := unix.Setrlimit(r.res, &lim); err != nil {
			return fmt.Errorf("setrlimit %s: %w", r.name, err)
		}
	}
	return nil
}
