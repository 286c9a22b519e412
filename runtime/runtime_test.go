package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
	qstate "github.com/quiver-mcp/quiver/runtime/state"

	"github.com/quiver-mcp/quiver/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime/guard"
)

var (
	cardsOnce sync.Once
	cardsB    *choicecard.Builder
)

func testCards(t testing.TB) *choicecard.Builder {
	t.Helper()
	cardsOnce.Do(func() {
		var err error
		if cardsB, err = choicecard.NewDefaultBuilder(); err != nil {
			panic(err)
		}
	})
	return cardsB
}

// testUpstream is an upstream of a test runtime: its configuration entry
// and, for a static one, its catalog held in memory (Deps.Catalogs).
type testUpstream struct {
	cfg config.Upstream
	src *catalog.Source
}

// rig is what a test runtime is built from.
type rig struct {
	cfg  *config.Config
	deps Deps
}

// setup returns the default configuration in mode with ups, in
// environment dev (most tests run without a registry; prod would deny
// every tool) and without a state directory (nothing written under the
// home directory), with the shared test card builder; tweaks then change
// it.
func setup(t testing.TB, mode config.Mode, ups []testUpstream, tweaks ...func(*rig)) rig {
	t.Helper()
	cfg := config.Default()
	cfg.Mode, cfg.Environment, cfg.StateDir = mode, guard.EnvDev, ""
	r := rig{cfg: cfg, deps: Deps{Cards: testCards(t), Catalogs: map[string]catalog.Source{}}}
	for _, u := range ups {
		cfg.Upstreams = append(cfg.Upstreams, u.cfg)
		if u.src != nil {
			r.deps.Catalogs[u.cfg.Name] = *u.src
		}
	}
	for _, f := range tweaks {
		f(&r)
	}
	return r
}

// newUpstream is an upstream entry with the defaults of the file but no
// tool prefix (the tests name tools as their upstreams do).
func newUpstream(name string) config.Upstream {
	u := config.NewUpstream(name)
	u.ToolPrefix = ""
	return u
}

// startRuntime starts a runtime from rg and connects one in-memory client.
func startRuntime(t *testing.T, rg rig) (*Runtime, *mcp.ClientSession) {
	t.Helper()
	rt, ctx := startOnly(t, rg)
	return rt, connect(t, ctx, rt)
}

// startOnly starts a runtime from rg, closed when the test ends, and
// returns it with the context it runs under.
func startOnly(t *testing.T, rg rig) (*Runtime, context.Context) {
	t.Helper()
	rt, err := New(rg.cfg, rg.deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		rt.Close()
	})
	if err := startAndWait(ctx, rt); err != nil {
		t.Fatal(err)
	}
	return rt, ctx
}

// startAndWait starts rt and waits for its first catalog; it returns
// Start's error or the one that failed the first catalog.
func startAndWait(ctx context.Context, rt *Runtime) error {
	if err := rt.Start(ctx); err != nil {
		return err
	}
	return rt.WaitPublished(ctx)
}

func connect(t *testing.T, ctx context.Context, rt *Runtime) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := rt.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func staticFleet(t *testing.T) []testUpstream {
	t.Helper()
	src, err := catalog.LoadFile("testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	u := newUpstream("fleet")
	u.TrustLevel, u.Risk = config.TrustVerified, config.RiskLow
	return []testUpstream{{cfg: u, src: &src}}
}

// call invokes a tool and returns its result and decoded structured content.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	if len(res.Content) == 0 {
		t.Fatalf("%s: no text content", name)
	}
	return res, m
}

func wantError(t *testing.T, cs *mcp.ClientSession, name string, args any, code string) map[string]any {
	t.Helper()
	res, m := call(t, cs, name, args)
	if !res.IsError || m["error"] != code {
		t.Fatalf("%s(%v): got isError=%v %v, want %s", name, args, res.IsError, m, code)
	}
	msg, _ := m["message"].(string)
	if msg == "" || strings.ContainsAny(msg, "\n\r") || len(msg) > maxMessage {
		t.Fatalf("bad error message %q", msg)
	}
	if _, ok := m["retryable"].(bool); !ok {
		t.Fatalf("error without retryable: %v", m)
	}
	return m
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func TestGatewaySurface(t *testing.T) {
	_, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t)))
	names := toolNames(t, cs)
	if strings.Join(names, ",") != "tool_browse,tool_execute,tool_hydrate,tool_view" {
		t.Fatalf("gateway lists %v", names)
	}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"additionalProperties":false`) {
			t.Errorf("%s schema lacks additionalProperties:false: %s", tool.Name, schema)
		}
	}
}

func TestBrowseHydrateExecute(t *testing.T) {
	_, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t)))

	_, m := call(t, cs, ToolBrowse, map[string]any{"query": "add two numbers", "top_k": 3})
	cards := m["cards"].([]any)
	if len(cards) == 0 || len(cards) > 3 {
		t.Fatalf("cards = %v", cards)
	}
	first := cards[0].(map[string]any)
	id := first["id"].(string)
	if !strings.HasPrefix(id, "math:add#") {
		t.Fatalf("first card %v", first)
	}
	for _, banned := range []string{"inputSchema", "args_schema", "annotations"} {
		if _, ok := first[banned]; ok {
			t.Fatalf("card carries %s", banned)
		}
	}

	_, h := call(t, cs, ToolHydrate, map[string]any{"tool_id": id})
	if h["name"] != "add" || h["inputSchema"] == nil {
		t.Fatalf("hydrate = %v", h)
	}
	ann := h["annotations"].(map[string]any)
	if ann["verified"] != false || ann["readOnlyHint"] != true {
		t.Fatalf("annotations = %v", ann)
	}
	cls := h["classification"].(map[string]any)
	if cls["trust_level"] != "verified" || cls["risk"] != "LOW" {
		t.Fatalf("classification = %v", cls)
	}

	res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": id, "args": map[string]any{"a": 2, "b": 3}})
	if res.IsError || env["status"] != "ok" {
		t.Fatalf("execute = %v", env)
	}
	prov := env["provenance"].(map[string]any)
	if prov["tool_id"] != id || prov["upstream_name"] != "add" || prov["server"] != "math" {
		t.Fatalf("provenance = %v", prov)
	}
	inline := env["result"].(map[string]any)
	if sc := inline["structuredContent"].(map[string]any); sc["a"] != 2.0 || sc["b"] != 3.0 {
		t.Fatalf("echo = %v", inline)
	}

	// A canned result.
	_, m = call(t, cs, ToolBrowse, map[string]any{"query": "create github issue", "top_k": 1})
	issue := m["cards"].([]any)[0].(map[string]any)["id"].(string)
	_, env = call(t, cs, ToolExecute, map[string]any{"tool_id": issue, "args": map[string]any{"repo": "a/b", "title": "x"}})
	if b, _ := json.Marshal(env["result"]); !strings.Contains(string(b), "created issue #42") {
		t.Fatalf("canned result = %v", env)
	}

	// Dry run: validated, not dispatched.
	_, dr := call(t, cs, ToolExecute, map[string]any{"tool_id": id, "args": map[string]any{"a": "x"}, "dry_run": true})
	if dr["args_valid"] != false {
		t.Fatalf("dry run = %v", dr)
	}
}

func TestBrowsePaths(t *testing.T) {
	_, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t), func(r *rig) { r.cfg.Browse.TopK = 2 }))
	_, m := call(t, cs, ToolBrowse, map[string]any{"path": "/"})
	cards := m["cards"].([]any)
	if len(cards) != 2 || m["next_cursor"] == nil {
		t.Fatalf("root page = %v", m)
	}
	seen := map[string]bool{}
	cursor := ""
	for {
		args := map[string]any{"path": "/"}
		if cursor != "" {
			args["cursor"] = cursor
		}
		_, m = call(t, cs, ToolBrowse, args)
		for _, c := range m["cards"].([]any) {
			card := c.(map[string]any)
			if card["kind"] != "internal" {
				t.Fatalf("root card %v", card)
			}
			seen[card["id"].(string)] = true
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 4 {
		t.Fatalf("namespaces = %v", seen)
	}
	_, m = call(t, cs, ToolBrowse, map[string]any{"path": "/math"})
	if len(m["cards"].([]any)) != 2 {
		t.Fatalf("/math = %v", m)
	}
}

func TestErrorPaths(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t)))
	var addID, badID string
	for _, it := range rt.Snapshot().All() {
		switch it.UpstreamName {
		case "add":
			addID = it.ID
		case "bad_schema":
			badID = it.ID
		}
	}
	cases := []struct {
		name string
		tool string
		args any
		code string
	}{
		{"both query and path", ToolBrowse, map[string]any{"query": "x", "path": "/"}, CodeArgsInvalid},
		{"neither", ToolBrowse, map[string]any{}, CodeArgsInvalid},
		{"top_k range", ToolBrowse, map[string]any{"query": "x", "top_k": 51}, CodeArgsInvalid},
		{"top_k type", ToolBrowse, map[string]any{"query": "x", "top_k": "3"}, CodeArgsInvalid},
		{"unknown field", ToolBrowse, map[string]any{"query": "x", "extra": 1}, CodeArgsInvalid},
		{"empty query", ToolBrowse, map[string]any{"query": "  "}, CodeArgsInvalid},
		{"bad path", ToolBrowse, map[string]any{"path": "/Math/"}, CodePathInvalid},
		{"missing path", ToolBrowse, map[string]any{"path": "/nope"}, CodePathNotFound},
		{"bad cursor", ToolBrowse, map[string]any{"path": "/", "cursor": "zzz"}, CodeArgsInvalid},
		{"hydrate unknown", ToolHydrate, map[string]any{"tool_id": "math:nope#00000000"}, CodeHydrateFailed},
		{"hydrate garbage", ToolHydrate, map[string]any{"tool_id": "\x00\n"}, CodeHydrateFailed},
		{"execute unknown", ToolExecute, map[string]any{"tool_id": "math:nope#00000000"}, CodeHydrateFailed},
		{"execute missing arg", ToolExecute, map[string]any{"tool_id": addID, "args": map[string]any{"a": 1}}, CodeArgsInvalid},
		{"execute wrong type", ToolExecute, map[string]any{"tool_id": addID, "args": map[string]any{"a": "1", "b": 2}}, CodeArgsInvalid},
		{"execute extra arg", ToolExecute, map[string]any{"tool_id": addID, "args": map[string]any{"a": 1, "b": 2, "c": 3}}, CodeArgsInvalid},
		{"execute args not object", ToolExecute, map[string]any{"tool_id": addID, "args": []int{1}}, CodeArgsInvalid},
		{"execute bad schema", ToolExecute, map[string]any{"tool_id": badID, "args": map[string]any{}}, CodeSchemaInvalid},
		{"view", ToolView, map[string]any{"handle": "art_x", "selector": map[string]any{"type": "head"}}, CodeViewFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := wantError(t, cs, tc.tool, tc.args, tc.code)
			if tc.name == "execute wrong type" {
				findings := m["details"].(map[string]any)["findings"].([]any)
				if findings[0].(map[string]any)["path"] != "/a" {
					t.Fatalf("findings = %v", findings)
				}
			}
		})
	}
}

func TestProxySurface(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeProxy, staticFleet(t)))
	names := toolNames(t, cs)
	n := len(rt.Snapshot().All())
	if len(names) != n+3 {
		t.Fatalf("proxy lists %d tools, want %d stripped + 3 meta: %v", len(names), n, names)
	}
	var entry string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(tool.Name, "tool_") {
			if tool.Name == ToolBrowse {
				t.Fatal("proxy mode lists tool_browse")
			}
			continue
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if string(schema) != `{"type":"object"}` {
			t.Fatalf("stripped entry %s has schema %s", tool.Name, schema)
		}
		if _, ok := rt.Snapshot().LookupWire(tool.Name); !ok {
			t.Fatalf("stripped entry %s is not a wire name", tool.Name)
		}
		entry = tool.Name
	}
	// Stripped entries are discovery only.
	wantError(t, cs, entry, map[string]any{}, CodeArgsInvalid)
}

func TestSanitize(t *testing.T) {
	long := strings.Repeat("é", 400)
	cases := map[string]string{
		"a\nb\r\nc\td":      "a b c d",
		"  x  ":             "x",
		"tab\x00nul\x1besc": "tab nul esc",
		"line\u2028sep":     "line sep",
	}
	for in, want := range cases {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	if got := sanitize(long); len(got) > maxMessage || !strings.HasSuffix(got, "…") {
		t.Errorf("long message: %d bytes", len(got))
	}
}

func TestRebuildSwapsAtomically(t *testing.T) {
	rt, _ := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t)))
	before := rt.state.Load()
	rt.markDirty("fleet")
	select {
	case <-rt.Rebuilt():
	case <-time.After(10 * time.Second):
		t.Fatal("no rebuild")
	}
	after := rt.state.Load()
	if after.gen != before.gen+1 || after.snap.Len() != before.snap.Len() {
		t.Fatalf("gen %d -> %d", before.gen, after.gen)
	}
}

// memoryBackend is a state backend in memory, closed when the test ends;
// runtimes given it in Deps.State share it as replicas share Redis.
func memoryBackend(t testing.TB) qstate.Backend {
	t.Helper()
	b, err := qstate.OpenMemory(artifacts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
