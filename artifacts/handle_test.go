package artifacts

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateHandle(t *testing.T) {
	good := newHandle()
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"fresh", good, true},
		{"all a", "art_" + strings.Repeat("a", 26), true},
		{"canonical last char", "art_" + strings.Repeat("7", 25) + "4", true},
		{"empty", "", false},
		{"prefix only", "art_", false},
		{"no prefix", strings.Repeat("a", 30), false},
		{"wrong prefix", "ART_" + strings.Repeat("a", 26), false},
		{"upper case", "art_" + strings.ToUpper(good[4:]), false},
		{"short", good[:len(good)-1], false},
		{"long", good + "a", false},
		{"padding", "art_" + strings.Repeat("a", 25) + "=", false},
		{"bad alphabet 1", "art_" + strings.Repeat("a", 25) + "1", false},
		{"bad alphabet 8", "art_" + strings.Repeat("a", 25) + "8", false},
		{"non-canonical trailing bits", "art_" + strings.Repeat("a", 25) + "b", false},
		{"slash", "art_" + strings.Repeat("a", 24) + "/a", false},
		{"nul", "art_" + strings.Repeat("a", 25) + "\x00", false},
		{"utf8", "art_" + strings.Repeat("a", 24) + "é", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateHandle(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateHandle(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestNewHandleUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		h := newHandle()
		if err := ValidateHandle(h); err != nil {
			t.Fatalf("newHandle() = %q: %v", h, err)
		}
		if seen[h] {
			t.Fatalf("duplicate handle %q", h)
		}
		seen[h] = true
	}
}

func FuzzValidateHandle(f *testing.F) {
	for _, s := range []string{"", "art_", newHandle(), "art_" + strings.Repeat("a", 25) + "b", "art_" + strings.Repeat("7", 26), "art_\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateHandle(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(s) != HandleLen || !strings.HasPrefix(s, HandlePrefix) {
			t.Fatalf("accepted %q of the wrong shape", s)
		}
		b, derr := handleEncoding.DecodeString(s[len(HandlePrefix):])
		if derr != nil || len(b) != handleRandBytes || HandlePrefix+handleEncoding.EncodeToString(b) != s {
			t.Fatalf("accepted %q that does not round-trip", s)
		}
	})
}
