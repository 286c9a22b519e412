package router

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	seg64 := "a" + strings.Repeat("b", 63)
	for _, tc := range []struct {
		in   string
		segs []string
		all  bool
		node string
	}{
		// §3.3 examples.
		{"/", nil, false, "/"},
		{"/github", []string{"github"}, false, "/github"},
		{"/github/issues", []string{"github", "issues"}, false, "/github/issues"},
		{"/github/issues/*", []string{"github", "issues"}, true, "/github/issues"},
		{"/github/issues/create_issue", []string{"github", "issues", "create_issue"}, false, "/github/issues/create_issue"},
		// More valid forms.
		{"/*", nil, true, "/"},
		{"/github/*", []string{"github"}, true, "/github"},
		{"/github/1st-cluster/9", []string{"github", "1st-cluster", "9"}, false, "/github/1st-cluster/9"},
		{"/a_b-c/d_-", []string{"a_b-c", "d_-"}, false, "/a_b-c/d_-"},
		{"/" + seg64, []string{seg64}, false, "/" + seg64},
		{"/a/" + "9" + strings.Repeat("z", 63), []string{"a", "9" + strings.Repeat("z", 63)}, false, "/a/9" + strings.Repeat("z", 63)},
	} {
		p, err := ParsePath(tc.in)
		if err != nil {
			t.Errorf("ParsePath(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(p.Segments, tc.segs) || p.All != tc.all || p.Node() != tc.node || p.String() != tc.in {
			t.Errorf("ParsePath(%q) = %+v (node %q, string %q)", tc.in, p, p.Node(), p.String())
		}
		if p.IsRoot() != (len(tc.segs) == 0) {
			t.Errorf("ParsePath(%q).IsRoot() = %v", tc.in, p.IsRoot())
		}
	}
}

func TestParsePathInvalid(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"", "empty"},
		{"github", "no leading slash"},
		{"github/issues", "no leading slash"},
		{"/github/", "trailing slash"},
		{"//", "empty segment and trailing slash"},
		{"//github", "empty segment"},
		{"/github//issues", "empty segment"},
		{"/GitHub", "upper case"},
		{"/github/Issues", "upper case deeper"},
		{"/1password", "namespace starting with a digit"},
		{"/_github", "namespace starting with '_'"},
		{"/-github", "namespace starting with '-'"},
		{"/github/_x", "segment starting with '_'"},
		{"/github/-x", "segment starting with '-'"},
		{"/github/a.b", "dot"},
		{"/github/a b", "space"},
		{"/github/a\nb", "line break"},
		{"/github/é", "non-ASCII"},
		{"/github/a:b", "colon"},
		{"/" + "a" + strings.Repeat("b", 64), "segment of 65 characters"},
		{"/*/issues", "star not last"},
		{"/github/*/create_issue", "star not last"},
		{"/github/*/*", "two stars"},
		{"/github/**", "double star"},
		{"/github/a*", "star inside a segment"},
		{"/github/*?tag=read-only", "filtered star (reserved)"},
		{"/github/issues/", "trailing slash after cluster"},
		{" /github", "leading space"},
		{"/github ", "trailing space"},
		{"/" + strings.Repeat("a/", MaxPathBytes/2), "over the length cap"},
		{"\\github", "backslash"},
	} {
		_, err := ParsePath(tc.in)
		if !errors.Is(err, ErrPathInvalid) {
			t.Errorf("ParsePath(%q) (%s) = %v, want ErrPathInvalid", tc.in, tc.why, err)
			continue
		}
		if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || len(msg) > 200 {
			t.Errorf("ParsePath(%q): message is not one short line: %q", tc.in, msg)
		}
	}
}

func TestParsePathLengthCap(t *testing.T) {
	// Exactly MaxPathBytes is parsed; one more byte is refused.
	s := "/" + strings.Repeat("a/", (MaxPathBytes-2)/2) + "a"
	if len(s) != MaxPathBytes {
		t.Fatalf("built %d bytes", len(s))
	}
	if _, err := ParsePath(s); err != nil {
		t.Errorf("a %d-byte path: %v", len(s), err)
	}
	if _, err := ParsePath(s + "x"); !errors.Is(err, ErrPathInvalid) {
		t.Errorf("a %d-byte path: %v", len(s)+1, err)
	}
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/", "/*", "/github", "/github/issues/*", "/github/issues/create_issue", "//", "/a/", "/A",
		"/1a", "/a/*/b", "/a/\x00", "/a/é", "/" + strings.Repeat("x", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			if !errors.Is(err, ErrPathInvalid) {
				t.Fatalf("ParsePath(%q): error %v does not wrap ErrPathInvalid", s, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("ParsePath(%q): message is not one line", s)
			}
			return
		}
		if got := p.String(); got != s {
			t.Fatalf("ParsePath(%q).String() = %q", s, got)
		}
		q, err := ParsePath(p.String())
		if err != nil || !slices.Equal(q.Segments, p.Segments) || q.All != p.All {
			t.Fatalf("round trip of %q: %+v, %v", s, q, err)
		}
		node, err := ParsePath(p.Node())
		if err != nil || node.All || !slices.Equal(node.Segments, p.Segments) {
			t.Fatalf("Node() of %q = %q does not parse to the same node: %v", s, p.Node(), err)
		}
		for i, seg := range p.Segments {
			if !ValidSegment(seg) || i == 0 && !(seg[0] >= 'a' && seg[0] <= 'z') {
				t.Fatalf("ParsePath(%q) accepted segment %q", s, seg)
			}
		}
	})
}
