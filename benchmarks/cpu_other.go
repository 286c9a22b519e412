//go:build !unix

package benchmarks

import "time"

// selfCPU returns 0 where getrusage is absent: CPU figures are then 0.
func selfCPU() time.Duration { return 0 }
