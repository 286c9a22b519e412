package argguard

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/egress"
)

func mustArgs(t *testing.T, raw string) map[string]any {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return args
}

func TestCheckWorkspace(t *testing.T) {
	g := &config.Workspace{Roots: []string{"/ws/main", "/shared/data"}}
	for _, tc := range []struct {
		name, raw string
		key       string // "" when allowed
	}{
		{"relative inside", `{"path":"src/main.go"}`, ""},
		{"absolute inside", `{"path":"/ws/main/src/a.go"}`, ""},
		{"root itself", `{"path":"/ws/main"}`, ""},
		{"dot", `{"path":"."}`, ""},
		{"empty", `{"path":""}`, ""},
		{"second root", `{"path":"/shared/data/x.csv"}`, ""},
		{"relative escape", `{"path":"../secret"}`, "path"},
		{"deep escape", `{"path":"src/../../../etc/passwd"}`, "path"},
		{"clean stays inside", `{"path":"src/../lib/./x"}`, ""},
		{"absolute outside", `{"path":"/etc/passwd"}`, "path"},
		{"sibling prefix", `{"path":"/ws/main2/x"}`, "path"},
		{"absolute escape via dotdot", `{"path":"/ws/main/../other"}`, "path"},
		{"home", `{"path":"~/.ssh/id_rsa"}`, "path"},
		{"nul", `{"path":"a\u0000b"}`, "path"},
		{"file uri inside", `{"path":"file:///ws/main/a.txt"}`, ""},
		{"file uri outside", `{"path":"file:///etc/passwd"}`, "path"},
		{"file uri upper", `{"path":"FILE:///etc/passwd"}`, "path"},
		{"file uri localhost", `{"path":"file://localhost/ws/main/a"}`, ""},
		{"file uri remote host", `{"path":"file://evil/ws/main/a"}`, "path"},
		{"file uri escaped dotdot", `{"path":"file:///ws/main/%2e%2e/x"}`, "path"},
		{"case-insensitive key", `{"Path":"/etc/passwd"}`, "Path"},
		{"other default key", `{"destination":"/tmp/x"}`, "destination"},
		{"unlisted key", `{"content":"/etc/passwd"}`, ""},
		{"array", `{"paths":["a","/etc/shadow"]}`, "paths"},
		{"nested array", `{"files":[["a"],["b",["/etc/x"]]]}`, "files"},
		{"nested object", `{"ops":[{"op":"copy","source":"a","target":"../../x"}]}`, "target"},
		{"object under path key", `{"path":{"file":"/etc/x"}}`, "file"},
		{"number under path key", `{"path":3}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Workspace(g, mustArgs(t, tc.raw))
			switch {
			case tc.key == "" && g != nil:
				t.Fatalf("refused: %v", g)
			case tc.key != "" && g == nil:
				t.Fatal("allowed")
			case g != nil:
				if g.Code != codes.PathOutsideWorkspace || g.Arg != tc.key || g.Path != "args" {
					t.Fatalf("error %+v", g)
				}
				if want := `argument "` + tc.key + `" names a path outside this upstream's workspace`; g.Message != want {
					t.Fatalf("message %q", g.Message)
				}
			}
		})
	}
	custom := &config.Workspace{Roots: []string{"/ws"}, PathArgs: []string{"Where"}}
	if g := Workspace(custom, mustArgs(t, `{"where":"/etc","path":"/etc"}`)); g == nil || g.Arg != "where" {
		t.Fatalf("custom keys: %+v", g)
	}
}

func TestCheckEgress(t *testing.T) {
	open := &config.Egress{Allow: []string{"api.example.com", "*.example.org", "127.0.0.1", "ports.example:8443"}}
	keyed := &config.Egress{Allow: open.Allow, URLArgs: []string{"URL", "endpoints"}}
	for _, tc := range []struct {
		name string
		g    *config.Egress
		raw  string
		host string // "" when allowed
	}{
		{"allowed", open, `{"url":"https://api.example.com/v1?token=abc"}`, ""},
		{"blocked any key", open, `{"note":"https://evil.com/x?secret=1"}`, "evil.com"},
		{"uppercase", open, `{"u":"HTTPS://API.EXAMPLE.COM/"}`, ""},
		{"wildcard", open, `{"u":"wss://a.b.example.org/s"}`, ""},
		{"wildcard apex", open, `{"u":"https://example.org/"}`, "example.org"},
		{"ip literal", open, `{"u":"http://127.0.0.1:9000/"}`, ""},
		{"other ip", open, `{"u":"http://10.0.0.1/"}`, "10.0.0.1"},
		{"ipv6", open, `{"u":"http://[::1]/"}`, "::1"},
		{"port match", open, `{"u":"http://ports.example:8443/"}`, ""},
		{"port mismatch", open, `{"u":"http://ports.example/"}`, "ports.example"},
		{"userinfo", open, `{"u":"http://api.example.com@evil.com/"}`, "evil.com"},
		{"nested", open, `{"a":[{"b":["ok","ftp://evil.com/f"]}]}`, "evil.com"},
		{"idn", open, `{"u":"https://аpi.example.com/"}`, "_pi.example.com"},
		{"plain text", open, `{"u":"evil.com"}`, ""},
		{"keyed other key: URLs still checked", keyed, `{"note":"https://evil.com/"}`, "evil.com"},
		{"keyed other key: bare forms not", keyed, `{"note":"evil.com/x and main.go:42"}`, ""},
		// finding 4: every scheme and scheme-less host forms
		{"gopher", open, `{"u":"gopher://evil.com/1"}`, "evil.com"},
		{"ssh", open, `{"u":"ssh://git@evil.com:2222/repo"}`, "evil.com"},
		{"ssh allowed host", open, `{"u":"ssh://git@api.example.com/repo"}`, ""},
		{"file with host", open, `{"u":"file://evil.com/share/x"}`, "evil.com"},
		{"file local", open, `{"u":"file:///etc/hosts"}`, ""},
		{"protocol-relative", open, `{"u":"//evil.com/x"}`, "evil.com"},
		{"triple slash", open, `{"u":"///evil.com/x"}`, "unknown"},
		{"scheme-less path", open, `{"u":"evil.com/x"}`, "evil.com"},
		{"scheme-less port", open, `{"u":"evil.com:8080"}`, "evil.com"},
		{"scheme-less ip", open, `{"u":"10.1.2.3/admin"}`, "10.1.2.3"},
		{"scheme-less allowed", open, `{"u":"api.example.com/v1"}`, ""},
		{"scp form", open, `{"u":"git@evil.com:org/repo.git"}`, "evil.com"},
		{"url in text", open, `{"text":"please fetch https://evil.com/x?d=1 now"}`, "evil.com"},
		{"second url in text", open, `{"text":"see https://api.example.com/a and (http://evil.com)"}`, "evil.com"},
		{"url glued to a word", open, `{"text":"link:https://evil.com"}`, "evil.com"},
		{"markdown link", open, `{"text":"[x](https://evil.com/y)"}`, "evil.com"},
		{"tab trick", open, `{"u":"http://api.example.com\t@evil.com/"}`, "evil.com"},
		{"space before userinfo", open, `{"u":"http://api.example.com @evil.com/"}`, "evil.com"},
		{"backslashes", open, `{"u":"http:\\\\evil.com/"}`, "evil.com"},
		{"one slash", open, `{"u":"https:/evil.com"}`, "unknown"},
		{"url as a key", open, `{"https://evil.com/":1}`, "evil.com"},
		{"source path is not a host", open, `{"text":"edit src/main.go and docs/errors.md, v1.2/x"}`, ""},
		{"prose is not a host", open, `{"text":"it is 12:30, e.g. call me; see README.md"}`, ""},
		{"email is not a host", open, `{"text":"mail alice@evil.com"}`, ""},
		{"comment slashes", open, `{"text":"// a comment"}`, ""},
		{"keyed case-insensitive", keyed, `{"url":"https://evil.com/"}`, "evil.com"},
		{"keyed scheme-less", keyed, `{"url":"evil.com/x"}`, "evil.com"},
		{"keyed array", keyed, `{"endpoints":["https://api.example.com/","https://evil.com/"]}`, "evil.com"},
		{"keyed file scheme", keyed, `{"url":"file:///etc/passwd"}`, "unknown"},
		{"keyed allowed", keyed, `{"url":"api.example.com"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Egress(tc.g, mustArgs(t, tc.raw))
			switch {
			case tc.host == "" && g != nil:
				t.Fatalf("refused: %v", g)
			case tc.host != "" && g == nil:
				t.Fatal("allowed")
			case g != nil:
				if g.Code != codes.EgressBlocked || g.Host != tc.host {
					t.Fatalf("error %+v", g)
				}
				if want := []string{ReasonEgressHostNotAllowed, egress.HostReason(tc.host)}; !slices.Equal(g.Reasons, want) {
					t.Fatalf("codes %v, want %v", g.Reasons, want)
				}
			}
		})
	}
}
