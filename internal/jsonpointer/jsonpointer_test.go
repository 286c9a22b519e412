package jsonpointer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		toks []string
		err  error
	}{
		{"", nil, nil},
		{"/", []string{""}, nil},
		{"/a/b", []string{"a", "b"}, nil},
		{"/a~1b/0", []string{"a/b", "0"}, nil},
		{"/~01", []string{"~1"}, nil},
		{"/m~0n", []string{"m~n"}, nil},
		{"//", []string{"", ""}, nil},
		{"a", nil, ErrNoSlash},
		{"/a~", nil, ErrEscape},
		{"/a~2", nil, ErrEscape},
		{"/" + strings.Repeat("x", 64), nil, ErrTooLong},
	} {
		toks, err := Parse(tc.in, 64)
		if !errors.Is(err, tc.err) || !slices.Equal(toks, tc.toks) {
			t.Errorf("Parse(%q) = %q, %v; want %q, %v", tc.in, toks, err, tc.toks, tc.err)
		}
		if err != nil && !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error %v does not wrap ErrSyntax", tc.in, err)
		}
	}
}

func TestFormatInvertsParse(t *testing.T) {
	for _, toks := range [][]string{nil, {""}, {"a/b", "~", "~1", "x y"}} {
		p := Format(toks)
		back, err := Parse(p, 1<<10)
		if err != nil || !slices.Equal(back, toks) && len(toks) > 0 {
			t.Errorf("Parse(Format(%q)) = %q, %v", toks, back, err)
		}
	}
	if got := Child("/a", "b/c"); got != "/a/b~1c" {
		t.Errorf("Child = %q", got)
	}
}

func TestArrayIndex(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  int
		ok bool
	}{
		{"0", 0, true}, {"12", 12, true}, {"999999999", 999999999, true},
		{"", 0, false}, {"-", 0, false}, {"01", 0, false}, {"1a", 0, false},
		{"-1", 0, false}, {"1234567890", 0, false}, {"+1", 0, false},
	} {
		n, ok := ArrayIndex(tc.in)
		if n != tc.n || ok != tc.ok {
			t.Errorf("ArrayIndex(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "/", "/a~1b/0", "/~0~1", "a", "/~", "/x/-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		toks, err := Parse(p, 4096)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrSyntax", p, err)
			}
			return
		}
		if (len(toks) == 0) != (p == "") {
			t.Fatalf("Parse(%q) = %q", p, toks)
		}
		if back := Format(toks); back != p {
			t.Fatalf("Format(Parse(%q)) = %q", p, back)
		}
		for _, tok := range toks {
			if again, err := Parse(Child("", tok), 1<<20); err != nil || len(again) != 1 || again[0] != tok {
				t.Fatalf("token %q does not round-trip: %q, %v", tok, again, err)
			}
		}
	})
}
