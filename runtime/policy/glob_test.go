package policy

import (
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"github:*", "github:create_issue#34afee88", true},
		{"github:*", "gitlab:x", false},
		{"*", "", true},
		{"*", "resource::file:///etc/passwd", true},
		{"github:create_*", "github:create_issue#34afee88", true},
		{"github:create_*#34afee88", "github:create_issue#34afee88", true},
		{"*issue*", "github:create_issue#34afee88", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "aéc", true},
		{"literal", "literal", true},
		{"literal", "literals", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{`a\?`, "a?", true},
		{"**a**b", "xxaxxb", true},
		{"*a*b", "xxbxxa", false},
		{"a*b*c*d*e*f*g*h*i*j*k", strings.Repeat("a", 200), false},
	}
	for _, tc := range tests {
		g, err := CompileGlob(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got := g.Match(tc.s); got != tc.want {
			t.Errorf("%q.Match(%q) = %v", tc.pattern, tc.s, got)
		}
		if g.String() != tc.pattern {
			t.Errorf("String() = %q", g.String())
		}
	}
	for _, bad := range []string{`a\`, "\xff"} {
		if _, err := CompileGlob(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

func TestQuoteGlob(t *testing.T) {
	for _, s := range []string{"github:create_issue#34afee88", `a*b?c\d`, "*", ""} {
		g, err := CompileGlob(QuoteGlob(s))
		if err != nil || !g.Match(s) {
			t.Fatalf("QuoteGlob(%q) = %q does not match it (%v)", s, QuoteGlob(s), err)
		}
		if s != "" && g.Match(s+"x") {
			t.Fatalf("QuoteGlob(%q) matches more", s)
		}
	}
	if g := MustGlob(QuoteGlob("a*")); g.Match("ab") {
		t.Fatal("a quoted star is a wildcard")
	}
}
