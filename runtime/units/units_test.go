package units

import (
	"testing"
	"time"
)

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"1", 1, false}, {"1024", 1024, false}, {"1B", 1, false}, {"100KB", 100_000, false},
		{"1kb", 1000, false}, {"512MiB", 512 << 20, false}, {"1 GiB", 1 << 30, false},
		{"1.5GiB", 3 << 29, false}, {"2TB", 2e12, false}, {"1TiB", 1 << 40, false},
		{"1.1B", 0, true}, {"", 0, true}, {"GiB", 0, true}, {"1XB", 0, true}, {"-1", 0, true},
		{"1e3", 0, true}, {"1/2", 0, true}, {".5KB", 0, true}, {"10000000TiB", 0, true},
	} {
		got, err := ParseSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v", tc.in, got, err)
		}
	}
	for _, n := range []int64{1, 999, 1000, 1024, 1536, 100_000, 1 << 30, 5 << 40, 3e12, 1<<63 - 1} {
		s := FormatSize(n)
		back, err := ParseSize(s)
		if err != nil || back != n {
			t.Errorf("FormatSize(%d) = %q -> %d, %v", n, s, back, err)
		}
	}
	for d, want := range map[time.Duration]string{
		time.Minute: "1m", 24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 100 * time.Millisecond: "100ms",
		90 * time.Second: "1m30s", time.Hour + time.Second: "1h0m1s", 0: "0s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
