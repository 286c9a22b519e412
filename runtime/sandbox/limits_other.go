//go:build !linux

package sandbox

import "errors"

// setLimits is only implemented on Linux, the only platform with a
// sandbox.
func setLimits(helperLimits) error { return errors.New("sandbox limits need Linux") }
