package egress

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFind(t *testing.T) {
	d := func(host, port string) Dest { return Dest{Host: host, Port: port, OK: true} }
	bad := func(host string) Dest { return Dest{Host: host} }
	for _, tc := range []struct {
		s    string
		bare bool
		want []Dest
	}{
		{"https://a.example/x", false, []Dest{d("a.example", "443")}},
		{"gopher://evil.com/1", false, []Dest{d("evil.com", "70")}},
		{"ssh://git@evil.com:2222/r", false, []Dest{d("evil.com", "2222")}},
		{"SSH://EVIL.COM./r", false, []Dest{d("evil.com", "22")}},
		{"x-custom+v1://evil.com", false, []Dest{d("evil.com", "")}},
		{"file://evil.com/share", false, []Dest{d("evil.com", "")}},
		{"file:///etc/passwd", false, nil},
		{"file://localhost/etc/passwd", false, nil},
		{"//evil.com/x", false, []Dest{d("evil.com", "")}},
		{"see //evil.com/x", false, []Dest{d("evil.com", "")}},
		{"///evil.com", false, []Dest{bad("")}},
		{"// comment", false, nil},
		{"a//b", false, nil},
		{"http:evil.com", false, []Dest{bad("")}},
		{"http:/evil.com", false, []Dest{bad("")}},
		{"http:\\\\evil.com\\x", false, []Dest{d("evil.com", "80")}},
		{"http://evil.com:99999/", false, []Dest{bad("evil.com")}},
		{"http://evil.com:x/", false, []Dest{bad("evil.com")}},
		{"http://[::1]:8080/", false, []Dest{d("::1", "8080")}},
		{"http://[zz]/", false, []Dest{bad("zz")}},
		{"http:///x", false, []Dest{bad("")}},
		{"text https://a.example and ftp://b.example/f.", false, []Dest{d("a.example", "443"), d("b.example", "21")}},
		{"word:https://evil.com", false, []Dest{d("evil.com", "443")}},
		{"<https://evil.com>", false, []Dest{d("evil.com", "443")}},
		{"h\tttp://evil.com/", false, []Dest{d("evil.com", "80"), d("evil.com", "")}},
		{"http://ok.example\n@evil.com/", false, []Dest{d("evil.com", "80"), d("ok.example", "80")}},
		{"https://ok.example/?next=https://evil.com", false, []Dest{d("ok.example", "443"), d("evil.com", "443")}},
		{"mailto:a@evil.com", true, nil},
		{"note: http is text", true, nil},
		{"the http: scheme", true, nil},
		// scheme-less words (bare)
		{"evil.com/x", true, []Dest{d("evil.com", "")}},
		{"evil.com/x", false, nil},
		{"evil.com:8080", true, []Dest{d("evil.com", "8080")}},
		{"localhost:6379", true, []Dest{d("localhost", "6379")}},
		{"10.0.0.7/admin", true, []Dest{d("10.0.0.7", "")}},
		{"[::1]:22", true, []Dest{d("::1", "22")}},
		{"git@evil.com:org/repo.git", true, []Dest{d("evil.com", "22")}},
		{"evil。com/x", true, []Dest{d("evil.com", "")}},
		{"bücher.de/x", true, []Dest{d("bücher.de", "")}},
		{"main.go:42", true, []Dest{d("main.go", "42")}},
		{"evil.com", true, nil},
		{"alice@evil.com", true, nil},
		{"src/main.go", true, nil},
		{"v1.2/x", true, nil},
		{"a.b/c", true, nil},
		{"12:30", true, nil},
		{"e.g.", true, nil},
		{"README.md", true, nil},
		{"", true, nil},
	} {
		if got := Find(tc.s, tc.bare); !slices.Equal(got, tc.want) {
			t.Errorf("Find(%q, %v) = %v, want %v", tc.s, tc.bare, got, tc.want)
		}
	}
}

func TestFindBounded(t *testing.T) {
	var b strings.Builder
	for i := range 3 * MaxDests {
		fmt.Fprintf(&b, "http://h%d.example/ ", i)
	}
	got := Find(b.String(), true)
	if len(got) != MaxDests+1 || got[MaxDests].OK {
		t.Fatalf("%d destinations, last %v: want %d and a refusal", len(got), got[len(got)-1], MaxDests+1)
	}
}

// FuzzFind checks the extractor's invariants on any text: it returns, a
// destination it calls OK has a lower-case host without the characters
// that end an authority, and a value Target reads as a URL is a value
// Find names a destination in.
func FuzzFind(f *testing.F) {
	for _, s := range []string{"https://a.example/x", "gopher://h:70", "//h/x", "h.example:1/x", "git@h.example:r",
		"http:\\\\h", "see [x](ssh://h) and http://[::1]:9/", "file://h/x", "a\tb\nhttp://x@y/", "ｈｔｔｐ://h"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, bare bool) {
		got := Find(s, bare)
		if len(got) > MaxDests+1 {
			t.Fatalf("%d destinations", len(got))
		}
		for _, d := range got {
			if !d.OK {
				continue
			}
			if d.Host == "" || strings.ContainsAny(d.Host, "/?#@ \t\n\\") || d.Host != strings.ToLower(d.Host) {
				t.Fatalf("Find(%q): host %q", s, d.Host)
			}
		}
		if _, _, isURL, _ := Target(s, false); isURL && len(got) == 0 && utf8.ValidString(s) {
			t.Fatalf("Target reads %q as a URL, Find names nothing", s)
		}
	})
}
