package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/toolid"
)

var (
	builderOnce sync.Once
	builder     *choicecard.Builder
	builderErr  error
)

// cards returns one shared Builder: building its token counter takes tens of
// milliseconds, so the tests share it.
func cards(t testing.TB) *choicecard.Builder {
	t.Helper()
	builderOnce.Do(func() { builder, builderErr = choicecard.NewDefaultBuilder() })
	if builderErr != nil {
		t.Fatal(builderErr)
	}
	return builder
}

const sharedTools = "../../shared/data/tools.jsonl"

func loadShared(t testing.TB) Source {
	t.Helper()
	src, err := LoadFile(sharedTools)
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("../shared/data not present beside the checkout")
	}
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestIngestSharedCatalog(t *testing.T) {
	src := loadShared(t)
	if len(src.Tools) != 3641 {
		t.Fatalf("loaded %d tools, want 3641", len(src.Tools))
	}
	snap, rep, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	counts := rep.Counts()
	t.Logf("report: tools=%d servers=%d dropped=%d errors=%d warnings=%d codes=%v", rep.Tools, rep.Servers, rep.Dropped, rep.Errors, rep.Warnings, counts)
	// mcpzero holds 5 duplicate (server, name) pairs (data README), and 17
	// tools of Basic Memory, Puppeteer and Whois MCP are listed by both
	// livemcpbench and mcpzero: the first listing of a (server, name) wins.
	if counts[CodeDuplicate] != 22 {
		t.Errorf("duplicates = %d, want 22", counts[CodeDuplicate])
	}
	if rep.Tools != 3641-22 || snap.Len() != rep.Tools {
		t.Errorf("snapshot holds %d tools (report %d), want %d", snap.Len(), rep.Tools, 3641-22)
	}
	// Real oddities of the data: one schema fails meta-validation, and
	// "Firecrawl" / "FireCrawl" fit to one namespace.
	if counts[CodeSchemaInvalid] != 1 || counts[CodeNamespaceCollision] != 2 {
		t.Errorf("findings = %v", counts)
	}
	if counts[CodeNameMapped] < 300 {
		t.Errorf("NAME_MAPPED = %d; the data has about 380 names outside the grammar", counts[CodeNameMapped])
	}
	if rep.Servers != 377 {
		t.Errorf("servers = %d, want 377", rep.Servers)
	}
	seen := map[string]bool{}
	for _, it := range snap.All() {
		if seen[it.ID] {
			t.Fatalf("duplicate key %s", it.ID)
		}
		seen[it.ID] = true
		if _, err := toolid.Parse(strings.SplitN(it.ID, "~", 2)[0]); err != nil {
			t.Fatalf("item %s: %v", it.ID, err)
		}
		if n := cards(t).Tokens(it.Card); n > choicecard.HardCapTokens {
			t.Fatalf("card %s costs %d tokens", it.ID, n)
		}
		if it.Card.ID != it.ID {
			t.Fatalf("card id %s != item id %s", it.Card.ID, it.ID)
		}
		if got, ok := snap.Lookup(it.ID); !ok || got != it {
			t.Fatalf("Lookup(%s) failed", it.ID)
		}
	}
}

func TestIngestDesignVectors(t *testing.T) {
	src := Source{Tools: []ToolDef{
		{Name: "github.create_issue", InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		{Name: "github.list_repos", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "slack_send_message", InputSchema: json.RawMessage(`{"type":"object","properties":{"channel":{"type":"string"},"text":{"type":"string"}},"required":["channel","text"]}`)},
		{Name: "github.create_issue", Meta: map[string]any{"version": "1.4.0"}, InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{}}}`)},
		{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`), Description: "an identical id: a duplicate"},
	}}
	snap, rep, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range snap.Items(toolid.KindTool) {
		got = append(got, it.ID)
	}
	want := []string{"github:create_issue#34afee88", "github:list_repos#da62b2ed", "slack:slack_send_message#283a5dcf",
		"github:create_issue@1.4.0", "mcp:read_file#559d82ea", "mcp:read_file#" + toolid.Hash8("read_file", toolid.Shape{Properties: []string{"path"}})}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ids = %v, want %v", got, want)
	}
	if rep.Counts()[CodeDuplicate] != 1 {
		t.Fatalf("report = %v", rep.Counts())
	}
}

func TestIngestServerNamespace(t *testing.T) {
	src := Source{Tools: []ToolDef{
		{Server: "GitHub", Name: "create_issue", InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{}},"required":["title"]}`)},
		{Server: "MCP Server", Name: "a", Description: "x"},
		{Server: "鸣潮 MCP Server", Name: "a", Description: "y"},
		{Server: "鸣潮", Name: "b", Description: "z"},
	}}
	snap, rep, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	items := snap.Items(toolid.KindTool)
	if items[0].ID != "github:create_issue#"+toolid.Hash8("create_issue", toolid.Shape{Properties: []string{"title"}, Required: []string{"title"}}) {
		t.Errorf("server namespace id = %s", items[0].ID)
	}
	if items[1].Namespace == items[2].Namespace || !strings.HasPrefix(items[1].Namespace, "mcp-server-") || !strings.HasPrefix(items[2].Namespace, "mcp-server-") {
		t.Errorf("colliding namespaces not disambiguated: %s %s", items[1].Namespace, items[2].Namespace)
	}
	if !strings.HasPrefix(items[3].Namespace, "ns-") || !toolid.ValidNamespace(items[3].Namespace) {
		t.Errorf("fallback namespace = %s", items[3].Namespace)
	}
	c := rep.Counts()
	if c[CodeNamespaceCollision] != 2 || c[CodeNamespaceMapped] != 1 {
		t.Errorf("findings = %v", c)
	}
	// Deterministic regardless of listing order.
	rev := Source{Tools: []ToolDef{src.Tools[2], src.Tools[1]}}
	snap2, _, _ := Ingest(rev, Options{Cards: cards(t)})
	if snap2.All()[1].Namespace != items[1].Namespace || snap2.All()[0].Namespace != items[2].Namespace {
		t.Errorf("namespace depends on order")
	}
}

func TestIngestCollisionsAndDuplicates(t *testing.T) {
	schema := json.RawMessage(`{"type":"object"}`)
	src := Source{Tools: []ToolDef{
		{Server: "s", Name: "t", Meta: map[string]any{"version": "1"}, InputSchema: schema},
		{Server: "s", Name: "t", Description: "again", InputSchema: schema},
		{Server: "S", Name: "t", Meta: map[string]any{"version": "1"}, InputSchema: schema},
	}}
	snap, rep, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range snap.All() {
		ids = append(ids, it.ID)
	}
	// "s" and "S" fit to one namespace, so both are suffixed; then the ids
	// differ and nothing needs ~N. The duplicate is dropped.
	if len(ids) != 2 || rep.Counts()[CodeDuplicate] != 1 {
		t.Fatalf("ids = %v, report %v", ids, rep.Counts())
	}
	// Same namespace, same name, same version: ~2.
	src = Source{Tools: []ToolDef{
		{Name: "gh.t", Meta: map[string]any{"version": "1"}},
		{Name: "gh/t", Meta: map[string]any{"version": "1"}},
	}}
	snap, rep, _ = Ingest(src, Options{Cards: cards(t)})
	if got := snap.All()[1].ID; got != "gh:t@1~2" || rep.Counts()[CodeIDCollision] != 1 {
		t.Fatalf("collision id = %s, report %v", got, rep.Counts())
	}
	if _, ok := snap.Lookup("gh:t@1~2"); !ok {
		t.Fatal("~2 key not addressable")
	}
}

func TestSchemaChecks(t *testing.T) {
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 40) + `{}` + strings.Repeat(`}}`, 40)
	var props strings.Builder
	props.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < 3000; i++ {
		if i > 0 {
			props.WriteByte(',')
		}
		props.WriteString(`"p` + strconv.Itoa(i) + `":{}`)
	}
	props.WriteString(`}}`)
	cases := []struct {
		name, schema, code string
	}{
		{"valid", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"draft7", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, ""},
		{"bad type", `{"type":"objekt"}`, CodeSchemaInvalid},
		{"not object", `[1,2]`, CodeSchemaInvalid},
		{"not json", `{"type":`, CodeSchemaInvalid},
		{"file ref refused", `{"$ref":"file:///etc/passwd"}`, CodeSchemaInvalid},
		{"http ref refused", `{"$ref":"http://127.0.0.1:1/x.json"}`, CodeSchemaInvalid},
		{"too deep", deep, CodeSchemaTooDeep},
		{"too many props", props.String(), CodeSchemaTooManyProps},
		{"too large", `{"description":"` + strings.Repeat("x", 300<<10) + `"}`, CodeSchemaTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := checkSchema(json.RawMessage(tc.schema), DefaultSchemaLimits)
			if c.code != tc.code {
				t.Fatalf("code = %q (%s), want %q", c.code, c.msg, tc.code)
			}
			if (c.compiled != nil) != (tc.code == "") {
				t.Fatalf("compiled = %v with code %q", c.compiled != nil, c.code)
			}
		})
	}
}

// TestSchemaInvalidMessage: a meta-validation failure names the failing
// keyword's whole location, however deep, within the one-line cap.
func TestSchemaInvalidMessage(t *testing.T) {
	c := checkSchema(json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"priority_level_of_the_thing":{"type":"strin"}}}}}}`), DefaultSchemaLimits)
	const where = "at /properties/items/items/properties/priority_level_of_the_thing/type: "
	if c.code != CodeSchemaInvalid || !strings.Contains(c.msg, where) || len(c.msg) > 300 {
		t.Fatalf("message %q does not name %q", c.msg, where)
	}
}

func TestLenientAndStrict(t *testing.T) {
	src := Source{Tools: []ToolDef{
		{Server: "s", Name: "good", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Server: "s", Name: "bad", InputSchema: json.RawMessage(`{"type":42}`)},
	}}
	snap, rep, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 1 || snap.Len() != 2 {
		t.Fatalf("lenient: errors=%d len=%d", rep.Errors, snap.Len())
	}
	bad := snap.All()[1]
	if bad.SchemaOK() || len(bad.Findings) == 0 {
		t.Fatal("bad schema not flagged")
	}
	if err := bad.ValidateArgs(map[string]any{}); !errors.Is(err, ErrSchemaInvalid) {
		t.Fatalf("ValidateArgs on a flagged tool = %v", err)
	}
	if _, _, err := Ingest(src, Options{Cards: cards(t), Strict: true}); !errors.Is(err, ErrRejected) {
		t.Fatalf("strict: %v", err)
	}
}

func TestValidateArgs(t *testing.T) {
	src := Source{Tools: []ToolDef{{Server: "s", Name: "add", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"tag":{"type":"string","maxLength":3}},"required":["a","b"],"additionalProperties":false}`)}}}
	snap, _, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	it := snap.All()[0]
	cases := []struct {
		name  string
		args  any
		paths []string
	}{
		{"ok", map[string]any{"a": 2.0, "b": 3}, nil},
		{"missing", map[string]any{"a": 2.0}, []string{""}},
		{"wrong type", map[string]any{"a": "x", "b": 1}, []string{"/a"}},
		{"extra", map[string]any{"a": 1, "b": 1, "c": 1}, []string{""}},
		{"two", map[string]any{"a": "x", "b": 1, "tag": "long"}, []string{"/a", "/tag"}},
		{"not object", "x", []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := it.ValidateArgs(tc.args)
			if tc.paths == nil {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			var ae *ArgsError
			if !errors.As(err, &ae) || !errors.Is(err, ErrArgsInvalid) {
				t.Fatalf("err = %v", err)
			}
			var got []string
			for _, f := range ae.Findings {
				got = append(got, f.Path)
				if f.Message == "" || strings.ContainsAny(f.Message, "\n\r") {
					t.Fatalf("bad finding message %q", f.Message)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.paths, ",") {
				t.Fatalf("finding paths = %v, want %v (%v)", got, tc.paths, ae)
			}
		})
	}
}

func TestHydrate(t *testing.T) {
	src := Source{
		Tools: []ToolDef{{Server: "fs", Name: "read", Description: "Read a file. Returns its text.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
			OutputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations:  map[string]any{"readOnlyHint": true}}},
		Resources: []ResourceDef{{URI: "file:///docs/readme.md", Name: "README", MIMEType: "text/markdown"}},
		Prompts:   []PromptDef{{Name: "summarize_pr", Arguments: []PromptArgument{{Name: "repo", Required: true}}}},
	}
	snap, _, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	tool := snap.Items(toolid.KindTool)[0]
	h, err := snap.Hydrate(tool.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "read" || h.Description != "Read a file. Returns its text." || string(h.InputSchema) == "" || h.Annotations["verified"] != false || h.Annotations["readOnlyHint"] != true {
		t.Fatalf("hydration = %+v", h)
	}
	if tool.Card.Safety != choicecard.SafetyReadOnly {
		t.Errorf("read-only hint not on the card: %+v", tool.Card)
	}
	if src.Tools[0].Annotations["verified"] != nil {
		t.Fatal("hydrate modified the source definition")
	}
	if _, err := snap.Hydrate("fs:nope#00000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if got := snap.Items(toolid.KindResource)[0].ID; got != "resource::file:README#a8c506b1" {
		t.Errorf("resource id = %s", got)
	}
	if got := snap.Items(toolid.KindPrompt)[0].ID; got != "prompt::mcp:summarize_pr#a85c17c1" {
		t.Errorf("prompt id = %s", got)
	}
	if c := snap.Items(toolid.KindResource)[0].Card; c.Kind != choicecard.KindResource {
		t.Errorf("resource card kind = %s", c.Kind)
	}
}

func TestDecodeShapes(t *testing.T) {
	cases := []struct {
		name, data string
		tools      int
		line       int // expected error line; 0 = success
		errSub     string
	}{
		{"jsonl", "{\"server\":\"a\",\"name\":\"x\"}\n\n{\"name\":\"y\",\"inputSchema\":{}}\n", 2, 0, ""},
		{"tools/list", `{"tools":[{"name":"x"},{"name":"y"}],"nextCursor":""}`, 2, 0, ""},
		{"snapshot", `{"tools":[{"name":"x"}],"resources":[{"uri":"a://b"}],"prompts":[{"name":"p"}]}`, 1, 0, ""},
		{"array", `[{"name":"x"}]`, 1, 0, ""},
		{"bom jsonl", "\ufeff{\"name\":\"x\"}", 1, 0, ""},
		{"bad line", "{\"name\":\"x\"}\n{\"name\":\"y\"}\n{\"name\": oops}\n", 0, 3, "malformed JSON"},
		{"bad doc", "{\"tools\": [\n{\"name\":\"x\"},\n{\"name\" \"y\"}]}", 0, 3, "malformed JSON"},
		{"truncated", "{\"tools\": [\n{\"name\":\"x\"", 0, 2, "unexpected end"},
		{"truncated line", "{\"name\":\"x\"}\n{\"name\":\n", 0, 2, "malformed JSON: unexpected end"},
		{"unknown shape", `{"foo":1}`, 0, 1, "unknown catalog shape"},
		{"nameless", "{\"name\":\"x\"}\n{\"description\":\"d\"}\n", 0, 2, "no name"},
		{"empty", "  \n", 0, -1, "empty"},
		{"text", "hello", 0, 1, "not JSON"},
		{"wrong type", "{\"tools\": {\"name\": 1}}", 0, 1, "expected"},
		{"trailing", `{"tools":[]} {"x":1}`, 0, 1, "unexpected data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Decode("f.json", []byte(tc.data))
			if tc.line == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if len(src.Tools) != tc.tools {
					t.Fatalf("tools = %d, want %d", len(src.Tools), tc.tools)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v", err)
			}
			if tc.line > 0 && fe.Line != tc.line {
				t.Fatalf("line = %d, want %d (%v)", fe.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.errSub) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("message %q lacks %q or spans lines", err, tc.errSub)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := LoadFile(t.TempDir()); !errors.Is(err, ErrFormat) {
		t.Fatalf("directory: %v", err)
	}
}

func BenchmarkIngestShared(b *testing.B) {
	src := loadShared(b)
	c := cards(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := Ingest(src, Options{Cards: c}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadShared(b *testing.B) {
	for i := 0; i < b.N; i++ {
		loadShared(b)
	}
}

func TestPrimitiveDuplicates(t *testing.T) {
	src := Source{
		Resources: []ResourceDef{{Server: "s", URI: "a://x", Name: "x"}, {Server: "s", URI: "a://x", Name: "again"}, {Server: "t", URI: "a://x", Name: "x"}},
		Prompts:   []PromptDef{{Server: "s", Name: "p"}, {Server: "s", Name: "p", Description: "again"}},
	}
	snap, rep, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Items(toolid.KindResource)) != 2 || len(snap.Items(toolid.KindPrompt)) != 1 || rep.Counts()[CodeDuplicate] != 2 || rep.Dropped != 2 {
		t.Fatalf("resources %d, prompts %d, report %v", len(snap.Items(toolid.KindResource)), len(snap.Items(toolid.KindPrompt)), rep.Counts())
	}
	if snap.Items(toolid.KindResource)[0].Resource.Name != "x" || snap.Items(toolid.KindPrompt)[0].Prompt.Description != "" {
		t.Fatal("a later duplicate replaced the first definition")
	}
}

func TestValidateOutput(t *testing.T) {
	src := Source{Tools: []ToolDef{
		{Server: "s", Name: "typed", OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		{Server: "s", Name: "untyped"},
	}}
	snap, _, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Item{}
	for _, it := range snap.Items(toolid.KindTool) {
		byName[it.UpstreamName] = it
	}
	typed := byName["typed"]
	if err := typed.ValidateOutput(map[string]any{"n": 3.0}); err != nil {
		t.Errorf("valid output: %v", err)
	}
	for _, bad := range []any{map[string]any{"n": "x"}, map[string]any{}, "text"} {
		err := typed.ValidateOutput(bad)
		var ae *ArgsError
		if !errors.Is(err, ErrOutputInvalid) || !errors.As(err, &ae) {
			t.Errorf("ValidateOutput(%v) = %v", bad, err)
		}
	}
	if err := byName["untyped"].ValidateOutput("anything"); err != nil {
		t.Errorf("a tool without outputSchema: %v", err)
	}
}

// TestCallSchema: a called tool's schema is decoded once and shared, equal
// to what InputSchema decodes afresh; concurrent first calls agree.
func TestCallSchema(t *testing.T) {
	src := Source{Tools: []ToolDef{
		{Server: "s", Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text"]}`)},
		{Server: "s", Name: "bare"},
	}}
	snap, _, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range snap.All() {
		var wg sync.WaitGroup
		got := make([]map[string]any, 8)
		for i := range got {
			wg.Go(func() { got[i] = it.CallSchema() })
		}
		wg.Wait()
		want := it.InputSchema()
		for i, g := range got {
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("%s: CallSchema #%d = %v, InputSchema %v", it.UpstreamName, i, g, want)
			}
			if reflect.ValueOf(g).Pointer() != reflect.ValueOf(got[0]).Pointer() {
				t.Fatalf("%s: CallSchema #%d is another map: decoded again", it.UpstreamName, i)
			}
		}
		if reflect.ValueOf(want).Pointer() == reflect.ValueOf(got[0]).Pointer() {
			t.Fatalf("%s: InputSchema returned the shared map", it.UpstreamName)
		}
	}
	// An item built outside ingest decodes afresh.
	it := &Item{Tool: &ToolDef{Name: "x"}, inputRaw: json.RawMessage(`{"type":"object"}`)}
	if got := it.CallSchema(); !reflect.DeepEqual(got, map[string]any{"type": "object"}) {
		t.Fatalf("outside ingest: %v", got)
	}
}
