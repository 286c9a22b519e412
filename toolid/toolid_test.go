package toolid

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFormatRoundTrip(t *testing.T) {
	valid := []struct {
		in   string
		want ID
	}{
		{"github:create_issue#34afee88", ID{"github", "create_issue", "", "34afee88"}},
		{"github:create_issue@1.4.0", ID{"github", "create_issue", "1.4.0", ""}},
		{"weather:get@2024-05", ID{"weather", "get", "2024-05", ""}},
		{"billing:refund@1#a1b2c3d4", ID{"billing", "refund", "1", "a1b2c3d4"}},
		{"mcp:read_file", ID{"mcp", "read_file", "", ""}},
		{"a:_", ID{"a", "_", "", ""}},
		{"a-b_c9:X.y-z", ID{"a-b_c9", "X.y-z", "", ""}},
		{strings.Repeat("a", 64) + ":" + strings.Repeat("b", 128) + "@" + strings.Repeat("1", 32) + "#00000000",
			ID{strings.Repeat("a", 64), strings.Repeat("b", 128), strings.Repeat("1", 32), "00000000"}},
	}
	for _, tc := range valid {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Parse = %#v, want %#v", got, tc.want)
			}
			s, err := Format(got)
			if err != nil || s != tc.in {
				t.Fatalf("Format = %q, %v; want %q", s, err, tc.in)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	invalid := []struct{ in, part string }{
		{"", "id"},
		{"github", "id"},
		{"GitHub:create", "namespace"},
		{"github:", "name"},
		{":name", "namespace"},
		{"github:create#12345678x", "hash8"},
		{"github:create@", "version"},
		{"9ns:tool", "namespace"},
		{"github:cre ate", "name"},
		{"github:create#ABCDEF12", "hash8"},
		{"github:create#", "hash8"},
		{"github:create#1234567", "hash8"},
		{"github:1create", "name"},
		{"github:create@1.0@2", "version"},
		{"github:create#12345678#12345678", "hash8"},
		{"git:hub:create", "name"},
		{"github:create@v/1", "version"},
		{strings.Repeat("a", 65) + ":x", "namespace"},
		{"a:" + strings.Repeat("b", 129), "name"},
		{"a:b@" + strings.Repeat("1", 33), "version"},
		{strings.Repeat("a", 241), "id"},
		{"resource::fs:readme#ab12cd34", "name"},
		{"fs:readme#ab12cd34~2", "hash8"},
	}
	for _, tc := range invalid {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse(tc.in)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) err = %v, want ErrInvalid", tc.in, err)
			}
			var se *SyntaxError
			if !errors.As(err, &se) || se.Part != tc.part {
				t.Fatalf("Parse(%q) = %v, want part %q", tc.in, err, tc.part)
			}
		})
	}
}

func TestFormatValidates(t *testing.T) {
	if _, err := Format(ID{Namespace: "Bad", Name: "x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Format accepted an invalid namespace: %v", err)
	}
}

func TestDesignVectors(t *testing.T) {
	obj := func(props []string, req []string) Shape { return Shape{Properties: props, Required: req} }
	cases := []struct {
		name, version string
		shape         Shape
		want          string
	}{
		{"github.create_issue", "", obj([]string{"title"}, []string{"title"}), "github:create_issue#34afee88"},
		{"github.list_repos", "", Shape{}, "github:list_repos#da62b2ed"},
		{"slack_send_message", "", obj([]string{"text", "channel"}, []string{"text", "channel"}), "slack:slack_send_message#283a5dcf"},
		{"github.create_issue", "1.4.0", obj([]string{"title"}, []string{"title"}), "github:create_issue@1.4.0"},
		{"read_file", "", Shape{}, "mcp:read_file#559d82ea"},
		{"read_file", "not a version!", Shape{}, "mcp:read_file#559d82ea"},
	}
	for _, tc := range cases {
		if got := ForTool("", tc.name, tc.version, tc.shape).String(); got != tc.want {
			t.Errorf("ForTool(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// sharedVectors is ../shared/vectors/ids.json, the project's golden ids.
type sharedVectors struct {
	Tools []struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"inputSchema"`
		Meta        struct {
			Version string `json:"version"`
		} `json:"_meta"`
		ToolID string `json:"tool_id"`
	} `json:"tools"`
	Resources []struct {
		URI, Name, Namespace string
		ResourceID           string `json:"resource_id"`
	} `json:"resources"`
	Prompts []struct {
		Name      string   `json:"name"`
		Arguments []string `json:"arguments"`
		Namespace string   `json:"namespace"`
		PromptID  string   `json:"prompt_id"`
	} `json:"prompts"`
	Collisions struct {
		Input  []string `json:"input"`
		Output []string `json:"output"`
	} `json:"collisions"`
	InvalidIDs []string `json:"invalid_ids"`
}

func loadSharedVectors(t *testing.T) sharedVectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "shared", "vectors", "ids.json"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("../shared/vectors/ids.json not present beside the checkout")
	}
	if err != nil {
		t.Fatal(err)
	}
	var v sharedVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSharedVectors(t *testing.T) {
	v := loadSharedVectors(t)
	if len(v.Tools) == 0 || len(v.Resources) == 0 || len(v.Prompts) == 0 || len(v.InvalidIDs) == 0 {
		t.Fatal("vector file has empty sections")
	}
	for _, tv := range v.Tools {
		got := ForTool("", tv.Name, tv.Meta.Version, ShapeOf(tv.InputSchema)).String()
		if got != tv.ToolID {
			t.Errorf("tool %q: got %s, want %s", tv.Name, got, tv.ToolID)
		}
		if _, err := Parse(got); err != nil {
			t.Errorf("derived id %s does not parse: %v", got, err)
		}
	}
	for _, rv := range v.Resources {
		id := ForResource("", rv.Name, rv.URI)
		if got := FormatPrimitive(KindResource, id); got != rv.ResourceID {
			t.Errorf("resource %q: got %s, want %s", rv.URI, got, rv.ResourceID)
		}
		if id.Namespace != rv.Namespace {
			t.Errorf("resource %q: namespace %s, want %s", rv.URI, id.Namespace, rv.Namespace)
		}
		kind, back, err := ParsePrimitive(rv.ResourceID)
		if err != nil || kind != KindResource || back != id {
			t.Errorf("ParsePrimitive(%s) = %v %v %v", rv.ResourceID, kind, back, err)
		}
	}
	for _, pv := range v.Prompts {
		id := ForPrompt("", pv.Name, pv.Arguments)
		if got := FormatPrimitive(KindPrompt, id); got != pv.PromptID {
			t.Errorf("prompt %q: got %s, want %s", pv.Name, got, pv.PromptID)
		}
	}
	got := Disambiguate(v.Collisions.Input)
	if strings.Join(got, ",") != strings.Join(v.Collisions.Output, ",") {
		t.Errorf("Disambiguate = %v, want %v", got, v.Collisions.Output)
	}
	for _, s := range v.InvalidIDs {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) accepted an invalid id", s)
		}
	}
}

func TestHash8PythonEscaping(t *testing.T) {
	// Values computed with the spec's Python reference (json.dumps defaults:
	// ensure_ascii, '<>&' unescaped, DEL escaped, astral runes as surrogates).
	cases := []struct {
		name  string
		shape Shape
		want  string
	}{
		{"t", Shape{Properties: []string{"关键词", "a<b&c>", "x\x7fy", "e\U0001F600", "q\"\\\n"}}, "fa280ec6"},
		{"搜索", Shape{Required: []string{"b", "a"}}, "876146d9"},
	}
	for _, tc := range cases {
		if got := Hash8(tc.name, tc.shape); got != tc.want {
			t.Errorf("Hash8(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestNamespace(t *testing.T) {
	cases := map[string]string{
		"github":                          "github",
		"GitHub":                          "github",
		"MCP Yahoo Finance":               "mcp-yahoo-finance",
		"MCP Server: Mermaid Validator":   "mcp-server-mermaid-validator",
		"Bazi MCP (八字 MCP) by Cantian AI": "bazi-mcp-mcp-by-cantian-ai",
		"鸣潮 MCP Server":                   "mcp-server",
		"鸣潮":                              "",
		"12306-mcp":                       "ns-12306-mcp",
		"__x__":                           "x",
		"Data.gov MCP Server":             "data-gov-mcp-server",
		"snake_case_server":               "snake_case_server",
		strings.Repeat("ab ", 40):         strings.TrimRight(strings.Repeat("ab-", 22)[:64], "-"),
	}
	for in, want := range cases {
		got := Namespace(in)
		if got != want {
			t.Errorf("Namespace(%q) = %q, want %q", in, got, want)
		}
		if got != "" && !ValidNamespace(got) {
			t.Errorf("Namespace(%q) = %q is not a valid namespace", in, got)
		}
	}
}

func TestName(t *testing.T) {
	cases := []struct {
		in, want string
		mapped   bool
	}{
		{"create_issue", "create_issue", false},
		{"Search Documentation", "Search_Documentation", true},
		{"@arizeai/phoenix-client", "arizeai_phoenix-client", true},
		{"get-weread-rank", "get-weread-rank", false},
		{"查询天气", "tool", true},
		{"1st tool", "_1st_tool", true},
		{"a/b", "a_b", true},
		{strings.Repeat("x", 200), strings.Repeat("x", 128), true},
	}
	for _, tc := range cases {
		got, mapped := Name(tc.in)
		if got != tc.want || mapped != tc.mapped {
			t.Errorf("Name(%q) = %q, %v; want %q, %v", tc.in, got, mapped, tc.want, tc.mapped)
		}
		if !ValidName(got) {
			t.Errorf("Name(%q) = %q is invalid", tc.in, got)
		}
	}
}

func TestInfer(t *testing.T) {
	cases := []struct{ in, ns, name string }{
		{"github.create_issue", "github", "create_issue"},
		{"filesystem/read", "filesystem", "read"},
		{"weather.get", "weather", "get"},
		{"slack_send_message", "slack", "slack_send_message"},
		{"read_file", "mcp", "read_file"},
		{"search", "mcp", "search"},
		{".hidden", "mcp", "_.hidden"},
		{"trailing.", "mcp", "trailing."},
		{"_a_b", "mcp", "_a_b"},
		{"a.b.c", "a", "b.c"},
		{"9x.tool", "ns-9x", "tool"},
		{"鸣潮.tool", "mcp", "_.tool"},
	}
	for _, tc := range cases {
		ns, name := Infer(tc.in)
		if ns != tc.ns || name != tc.name {
			t.Errorf("Infer(%q) = %q, %q; want %q, %q", tc.in, ns, name, tc.ns, tc.name)
		}
	}
}

func TestForToolKnownServer(t *testing.T) {
	id := ForTool("github", "github.create_issue", "", Shape{Properties: []string{"title"}, Required: []string{"title"}})
	// With the server known the name is verbatim, and hash8 covers the
	// original upstream name.
	if id.String() != "github:github.create_issue#34afee88" {
		t.Fatalf("got %s", id)
	}
	mapped := ForTool("aws", "Search Documentation", "", Shape{})
	if mapped.Name != "Search_Documentation" || mapped.Hash != Hash8("Search Documentation", Shape{}) {
		t.Fatalf("got %#v", mapped)
	}
	if _, err := Format(mapped); err != nil {
		t.Fatal(err)
	}
}

func TestParsePrimitive(t *testing.T) {
	cases := []struct {
		in   string
		kind Kind
		ok   bool
	}{
		{"github:create_issue#34afee88", KindTool, true},
		{"resource::file:README#a8c506b1", KindResource, true},
		{"prompt::mcp:summarize_pr#a85c17c1", KindPrompt, true},
		{"tool::github:x", "", false},
		{"resource::", "", false},
		{"prompt::mcp:x#a85c17c1~2", "", false},
		{"other::a:b", "", false},
	}
	for _, tc := range cases {
		kind, id, err := ParsePrimitive(tc.in)
		if (err == nil) != tc.ok || kind != tc.kind {
			t.Errorf("ParsePrimitive(%q) = %v, %v", tc.in, kind, err)
			continue
		}
		if tc.ok && FormatPrimitive(kind, id) != tc.in {
			t.Errorf("round trip of %q = %q", tc.in, FormatPrimitive(kind, id))
		}
	}
}

func TestDisambiguateOrder(t *testing.T) {
	got := Disambiguate([]string{"a:x", "b:y", "a:x", "a:x", "b:y"})
	want := []string{"a:x", "b:y", "a:x~2", "a:x~3", "b:y~2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
}
