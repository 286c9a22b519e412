package toolid

import (
	"errors"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"github:create_issue#34afee88", "github:create_issue@1.4.0", "mcp:read_file",
		"a:b@1#00000000", "GitHub:create", "github:", ":x", "x:y#", "x:y@", "x:y@1@2",
		"resource::file:README#a8c506b1", "a:b~2", "a:\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v is not ErrInvalid", s, err)
			}
			return
		}
		out, err := Format(id)
		if err != nil {
			t.Fatalf("Format(Parse(%q)) failed: %v", s, err)
		}
		if out != s {
			t.Fatalf("round trip %q -> %q", s, out)
		}
	})
}

func FuzzDerive(f *testing.F) {
	f.Add("github", "github.create_issue", "", "title")
	f.Add("", "slack_send_message", "1.0", "channel")
	f.Add("鸣潮 MCP", "查询 天气", "v/1", "关键词")
	f.Fuzz(func(t *testing.T, server, name, version, prop string) {
		id := ForTool(Namespace(server), name, version, Shape{Properties: []string{prop}})
		s, err := Format(id)
		if err != nil {
			t.Fatalf("ForTool(%q, %q, %q) produced an invalid id %q: %v", server, name, version, id, err)
		}
		if back, err := Parse(s); err != nil || back != id {
			t.Fatalf("derived id %q does not round trip: %v", s, err)
		}
		for _, kind := range []Kind{KindResource, KindPrompt} {
			var pid ID
			if kind == KindResource {
				pid = ForResource(Namespace(server), name, prop)
			} else {
				pid = ForPrompt(Namespace(server), name, []string{prop})
			}
			k, back, err := ParsePrimitive(FormatPrimitive(kind, pid))
			if err != nil || k != kind || back != pid {
				t.Fatalf("primitive %v %#v does not round trip: %v", kind, pid, err)
			}
		}
	})
}
