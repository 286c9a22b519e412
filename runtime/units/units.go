// Package units holds the Duration and Size types of quiver's
// configuration: how "90s" and "1GiB" are read from a file and written
// back. It is a leaf package so that every package with a configuration
// block (config, identity) can use the same types.
package units

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration read from and written as a Go duration
// string ("100ms", "1h30m").
type Duration time.Duration

// ErrDuration is the error of a duration that does not parse; the schema
// has checked the syntax, so what is left is overflow.
var ErrDuration = errors.New("is not a valid duration (too large?)")

// String formats d with FormatDuration.
func (d Duration) String() string { return FormatDuration(time.Duration(d)) }

// MarshalText writes d with FormatDuration, so that YAML and JSON both
// print "24h" rather than a count of nanoseconds.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return ErrDuration
	}
	*d = Duration(v)
	return nil
}

// Size is a number of bytes, read from an integer or a string with a unit
// (ParseSize) and written with FormatSize.
type Size int64

// String formats s with FormatSize.
func (s Size) String() string { return FormatSize(int64(s)) }

// MarshalText writes s with FormatSize ("1GiB").
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a size string (ParseSize).
func (s *Size) UnmarshalText(b []byte) error {
	n, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// UnmarshalJSON accepts a size as a JSON integer or string; the text
// interface alone would refuse a number.
func (s *Size) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		return s.UnmarshalText([]byte(str))
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return errors.New("is too large")
	}
	*s = Size(n)
	return nil
}

// ParseSize parses a size: a decimal number of bytes ("1048576"), or a
// number with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB,
// TiB (powers of 1024), case-insensitive, optionally after one space
// ("1GiB", "512 MiB", "1.5KB"). The result must be a whole number of bytes
// that fits in an int64.
func ParseSize(s string) (int64, error) {
	num := strings.TrimRight(s, "bBkKmMgGtTiI")
	unit := strings.ToLower(s[len(num):])
	num = strings.TrimSuffix(num, " ")
	mult := int64(1)
	switch unit {
	case "", "b":
	case "kb":
		mult = 1000
	case "mb":
		mult = 1000 * 1000
	case "gb":
		mult = 1000 * 1000 * 1000
	case "tb":
		mult = 1000 * 1000 * 1000 * 1000
	case "kib":
		mult = 1 << 10
	case "mib":
		mult = 1 << 20
	case "gib":
		mult = 1 << 30
	case "tib":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("unknown size unit %q", s[len(s)-len(unit):])
	}
	if !isDecimal(num) {
		return 0, errors.New("not a size")
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, errors.New("not a size")
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, errors.New("is not a whole number of bytes")
	}
	if !r.Num().IsInt64() {
		return 0, errors.New("is too large")
	}
	return r.Num().Int64(), nil
}

// FormatSize formats n bytes in the largest unit that divides it exactly
// (binary units first, then decimal ones); otherwise as a plain integer
// string. ParseSize(FormatSize(n)) == n.
func FormatSize(n int64) string {
	if n > 0 {
		for _, u := range []struct {
			mult int64
			name string
		}{
			{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"},
			{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"},
		} {
			if n%u.mult == 0 {
				return strconv.FormatInt(n/u.mult, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// FormatDuration formats d like time.Duration.String without the trailing
// zero units: "24h", "1h30m", "60s" is "1m", "100ms".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// isDecimal reports whether s is digits with at most one inner '.', and at
// most 40 bytes.
func isDecimal(s string) bool {
	if s == "" || len(s) > 40 || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	dot := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && !dot:
			dot = true
		case c < '0' || c > '9':
			return false
		}
	}
	return true
}
