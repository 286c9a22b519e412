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

// matchRunes is Glob.Match as it was, over []rune(s): the reference the
// in-place decoding is held to.
func matchRunes(g Glob, s string) bool {
	if g.literal {
		return s == g.pattern
	}
	rs := []rune(s)
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(rs) {
		if ti < len(g.toks) {
			switch t := g.toks[ti]; t.kind {
			case '*':
				starT, starS = ti, si
				ti++
				continue
			case '?':
				ti++
				si++
				continue
			default:
				if t.r == rs[si] {
					ti++
					si++
					continue
				}
			}
		}
		if starT < 0 {
			return false
		}
		starS++
		ti, si = starT+1, starS
	}
	for ti < len(g.toks) && g.toks[ti].kind == '*' {
		ti++
	}
	return ti == len(g.toks)
}

// FuzzGlobMatch holds Glob.Match to the rune-slice matcher on any pattern
// and subject, invalid UTF-8 in the subject included.
func FuzzGlobMatch(f *testing.F) {
	for _, c := range [][2]string{
		{"github:*", "github:create_issue#34afee88"}, {"a?c", "aéc"}, {"*\uFFFD*", "x\xffy"},
		{"?", "\xff"}, {"*a*b", "xxbxxa"}, {"é*?", "éé"}, {`a\*`, "a*"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		g, err := CompileGlob(pattern)
		if err != nil {
			return
		}
		if got, want := g.Match(s), matchRunes(g, s); got != want {
			t.Fatalf("%q.Match(%q) = %v, rune matcher %v", pattern, s, got, want)
		}
	})
}

func BenchmarkGlobMatch(b *testing.B) {
	g, err := CompileGlob("github*:get_*")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		g.Match("github-enterprise:get_pull_request_review_comments#34afee88")
	}
}

// TestGlobSet: a set matches when any of its patterns does, literal ones
// (looked up in a map) and wildcard or escaped ones (tried in turn) alike.
func TestGlobSet(t *testing.T) {
	gs, err := compileGlobs("server", []string{"github", "gitlab", "jira-*", `odd\*name`, "a?c"})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"github": true, "gitlab": true, "jira-cloud": true, "odd*name": true, "abc": true,
		"githubx": false, "jira": false, `odd\*name`: false, "oddxname": false, "": false, "a?c": true,
	} {
		if got := gs.match(s); got != want {
			t.Errorf("match(%q) = %v", s, got)
		}
	}
	if gs, err := compileGlobs("server", nil); gs != nil || err != nil {
		t.Errorf("no patterns: %v, %v", gs, err)
	}
	if _, err := compileGlobs("server", []string{"ok", `bad\`}); err == nil {
		t.Error("a bad pattern compiled")
	}
}
