package textclean

import (
	"strings"
	"testing"
)

func TestOneLine(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"a\nb\r\n\tc", 100, "a b c"},
		{"  x  ", 100, "x"},
		{"nul\x00del\x7fc1\u0085end", 100, "nul del c1 end"},
		{strings.Repeat("ab", 200), 300, strings.Repeat("ab", 150)},
		{"", 10, ""},
	}
	for _, tc := range cases {
		if got := OneLine(tc.in, tc.max); got != tc.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
