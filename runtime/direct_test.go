package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
)

// exposeTool is a static catalog tool.
func exposeTool(name string) catalog.ToolDef {
	return catalog.ToolDef{Name: name, Description: "The " + name + " tool.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
}

// staticUpstream is a static upstream serving tools (and optionally
// prompts and resources) under prefix.
func staticUpstream(name, prefix string, tools []string, prompts []string, uris []string) testUpstream {
	src := catalog.Source{}
	for _, n := range tools {
		src.Tools = append(src.Tools, exposeTool(n))
	}
	for _, n := range prompts {
		src.Prompts = append(src.Prompts, catalog.PromptDef{Name: n, Description: "The " + n + " prompt."})
	}
	for _, u := range uris {
		src.Resources = append(src.Resources, catalog.ResourceDef{URI: u, Name: u, Text: "x"})
	}
	u := newUpstream(name)
	u.ToolPrefix = prefix
	return testUpstream{cfg: u, src: &src}
}

// newDirectRuntime builds and starts a runtime with static upstreams; it
// returns Start's error.
func newDirectRuntime(t *testing.T, rg rig) (*Runtime, error) {
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
	return rt, startAndWait(ctx, rt)
}

// exposedTools maps each directly listed name to "server/upstream name".
func exposedTools(t *testing.T, rt *Runtime) map[string]string {
	t.Helper()
	st := rt.state.Load()
	out := map[string]string{}
	for name, id := range st.exp.tools {
		it, ok := st.snap.Lookup(id)
		if !ok {
			t.Fatalf("exposed %q names %q, which is not in the catalog", name, id)
		}
		out[name] = it.Server + "/" + it.UpstreamName
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestDirectExposeNames(t *testing.T) {
	t.Parallel()
	rt, err := newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "a_", []string{"search", "fetch"}, []string{"greet"}, []string{"file:///a.txt"}),
		staticUpstream("b", "b_", []string{"search", "list"}, []string{"greet"}, []string{"file:///b.txt"}),
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a_search": "a/search", "a_fetch": "a/fetch", "b_search": "b/search", "b_list": "b/list"}
	if got := exposedTools(t, rt); !mapsEqual(got, want) {
		t.Fatalf("exposed tools %v, want %v", got, want)
	}
	st := rt.state.Load()
	if got := sortedNames(st.exp.prompts); !slices.Equal(got, []string{"a_greet", "b_greet"}) {
		t.Errorf("exposed prompts %v", got)
	}
	// Resources keep their URIs: no prefix.
	if got := sortedNames(st.exp.resources); !slices.Equal(got, []string{"file:///a.txt", "file:///b.txt"}) {
		t.Errorf("exposed resources %v", got)
	}
	if len(st.exp.withheld) != 0 {
		t.Errorf("withheld %v", st.exp.withheld)
	}
	// What a client lists: the exposed tools and tool_view.
	cs := connect(t, context.Background(), rt)
	got := toolNames(t, cs)
	sort.Strings(got)
	if want := []string{"a_fetch", "a_search", "b_list", "b_search", ToolView}; !slices.Equal(got, want) {
		t.Fatalf("listed tools %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestDirectExposeCollisionFailsStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ups      []testUpstream
		contains []string
	}{
		{"tools, no prefixes", []testUpstream{
			staticUpstream("a", "", []string{"search"}, nil, nil),
			staticUpstream("b", "", []string{"search"}, nil, nil),
		}, []string{"name collision", `tool "search" of server "b"`, `taken by server "a"`, "tool_prefix"}},
		{"tools, a prefix that makes names meet", []testUpstream{
			staticUpstream("a", "", []string{"x_search"}, nil, nil),
			staticUpstream("b", "x_", []string{"search"}, nil, nil),
		}, []string{"name collision", `tool "x_search" of server "b"`}},
		{"prompts", []testUpstream{
			staticUpstream("a", "", []string{"one"}, []string{"greet"}, nil),
			staticUpstream("b", "", []string{"two"}, []string{"greet"}, nil),
		}, []string{"name collision", `prompt "greet" of server "b"`}},
		{"a meta-tool's name", []testUpstream{
			staticUpstream("a", "", []string{ToolView, "ok"}, nil, nil),
		}, []string{"name collision", `tool "tool_view" of server "a": the name is a quiver meta-tool's`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := newDirectRuntime(t, setup(t, config.ModeDirect, tc.ups))
			if err == nil {
				t.Fatal("Start succeeded despite a name collision")
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// A URI is no name a tool_prefix could change: two upstreams serving one
// URI start, the first configured serves it, and the second's is withheld.
func TestDirectExposeSameResourceURI(t *testing.T) {
	t.Parallel()
	rt, err := newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "a_", nil, nil, []string{"file:///same"}),
		staticUpstream("b", "b_", nil, nil, []string{"file:///same"}),
	}))
	if err != nil {
		t.Fatal(err)
	}
	exp := rt.state.Load().exp
	id, ok := exp.resources["file:///same"]
	if it, found := rt.state.Load().snap.Lookup(id); !ok || !found || it.Server != "a" {
		t.Fatalf("file:///same is served by %q, want a", id)
	}
	if len(exp.withheld) != 1 || !strings.Contains(exp.withheld[0], `resource "file:///same" of server "b": server "a" serves the same URI`) || len(exp.clashes) != 0 {
		t.Fatalf("withheld %q, clashes %q", exp.withheld, exp.clashes)
	}
}

func TestDirectExposeMetaToolNames(t *testing.T) {
	t.Parallel()
	// Direct mode's only meta-tool is tool_view: tool_browse is free.
	rt, err := newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "", []string{ToolBrowse, "x"}, nil, nil),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := exposedTools(t, rt); got[ToolBrowse] != "a/"+ToolBrowse {
		t.Fatalf("exposed %v, want tool_browse listed in direct mode", got)
	}
	// With the firewall off there is no tool_view to reserve.
	rt, err = newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "", []string{ToolView}, nil, nil),
	}, func(r *rig) { r.cfg.Firewall.Enabled = !(true) }))
	if err != nil {
		t.Fatal(err)
	}
	if got := exposedTools(t, rt); got[ToolView] != "a/"+ToolView {
		t.Fatalf("exposed %v, want tool_view listed with the firewall off", got)
	}
	// A prefix avoids the reserved name.
	rt, err = newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "a_", []string{ToolView}, nil, nil),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := exposedTools(t, rt); got["a_tool_view"] != "a/"+ToolView {
		t.Fatalf("exposed %v", got)
	}
}

// unstarted returns a runtime that was built but not started, with the
// snapshot and owner map of its static upstreams in configuration order
// (what rebuild computes).
func unstarted(t *testing.T, rg rig) (*Runtime, *catalog.Snapshot, map[string]*upstreamEntry) {
	t.Helper()
	rt, err := New(rg.cfg, rg.deps)
	if err != nil {
		t.Fatal(err)
	}
	var src catalog.Source
	owner := map[string]*upstreamEntry{}
	for _, c := range rt.upstreams() {
		l, err := c.listing(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		src.Tools = append(src.Tools, l.Tools...)
		src.Prompts = append(src.Prompts, l.Prompts...)
		src.Resources = append(src.Resources, l.Resources...)
		for _, td := range l.Tools {
			owner[td.Server] = c
		}
		for _, p := range l.Prompts {
			owner[p.Server] = c
		}
		for _, r := range l.Resources {
			owner[r.Server] = c
		}
	}
	snap, _, err := catalog.Ingest(src, catalog.Options{Cards: testCards(t)})
	if err != nil {
		t.Fatal(err)
	}
	return rt, snap, owner
}

func idIn(t *testing.T, snap *catalog.Snapshot, server, name string) string {
	t.Helper()
	for _, it := range snap.All() {
		if it.Server == server && it.UpstreamName == name {
			return it.ID
		}
	}
	t.Fatalf("no %s/%s in the snapshot", server, name)
	return ""
}

func TestExposeKeepsPreviousHolder(t *testing.T) {
	t.Parallel()
	rt, snap, owner := unstarted(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "", []string{"search", "only_a"}, []string{"greet"}, []string{"file:///same"}),
		staticUpstream("b", "", []string{"search"}, []string{"greet"}, []string{"file:///same"}),
	}))
	aSearch, bSearch := idIn(t, snap, "a", "search"), idIn(t, snap, "b", "search")
	aGreet, bGreet := idIn(t, snap, "a", "greet"), idIn(t, snap, "b", "greet")
	aRes, bRes := idIn(t, snap, "a", "file:///same"), idIn(t, snap, "b", "file:///same")

	// From nothing, configuration order decides.
	first := rt.expose(emptyExposure(), snap, rt.upstreams(), owner, nil)
	if first.tools["search"] != aSearch || first.prompts["greet"] != aGreet || first.resources["file:///same"] != aRes {
		t.Fatalf("first exposure %+v", first)
	}
	if first.tools["only_a"] != idIn(t, snap, "a", "only_a") {
		t.Fatalf("only_a not exposed: %v", first.tools)
	}
	if len(first.withheld) != 3 || !strings.Contains(strings.Join(first.withheld, "\n"), `of server "b": the name is taken by server "a"`) {
		t.Fatalf("first withheld %q", first.withheld)
	}

	// A name held by the later upstream's item stays with it.
	prev := emptyExposure()
	prev.tools["search"] = bSearch
	prev.prompts["greet"] = bGreet
	prev.resources["file:///same"] = bRes
	next := rt.expose(prev, snap, rt.upstreams(), owner, nil)
	if next.tools["search"] != bSearch || next.prompts["greet"] != bGreet || next.resources["file:///same"] != bRes {
		t.Fatalf("the previous holders lost their names: %+v", next)
	}
	w := strings.Join(next.withheld, "\n")
	for _, s := range []string{`tool "search" of server "a": the name is taken by server "b"`, `prompt "greet" of server "a"`, `resource "file:///same" of server "a"`} {
		if !strings.Contains(w, s) {
			t.Errorf("withheld %q lacks %q", next.withheld, s)
		}
	}
	if next.tools["only_a"] == "" {
		t.Errorf("an uncontested name was dropped: %v", next.tools)
	}

	// A previous holder that is gone frees its name for the next in order.
	gone := emptyExposure()
	gone.tools["search"] = "nobody:search"
	if e := rt.expose(gone, snap, rt.upstreams(), owner, nil); e.tools["search"] != aSearch {
		t.Fatalf("with a vanished holder: %v", e.tools)
	}
	// A previous exposure under another name does not hold this one.
	renamed := emptyExposure()
	renamed.tools["old_search"] = bSearch
	if e := rt.expose(renamed, snap, rt.upstreams(), owner, nil); e.tools["search"] != aSearch || e.tools["old_search"] != "" {
		t.Fatalf("with a renamed holder: %v", e.tools)
	}
}

func TestExposeTemplates(t *testing.T) {
	t.Parallel()
	rt, snap, owner := unstarted(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "", []string{"x"}, nil, nil),
		staticUpstream("b", "", []string{"y"}, nil, nil),
	}))
	tmpl := func(ut string) *mcp.ResourceTemplate { return &mcp.ResourceTemplate{URITemplate: ut, Name: ut} }
	e := rt.expose(emptyExposure(), snap, rt.upstreams(), owner, map[string][]*mcp.ResourceTemplate{
		"a": {tmpl("x://{id}"), tmpl("a://{id}")},
		"b": {tmpl("x://{id}"), tmpl("b://{id}")},
	})
	if got := sortedNames(e.templates); !slices.Equal(got, []string{"a://{id}", "b://{id}", "x://{id}"}) {
		t.Fatalf("templates %v", got)
	}
	if o := e.templates["x://{id}"].owner; o.name() != "a" {
		t.Fatalf("x://{id} served by %q, want the first configured", o.name())
	}
	if len(e.withheld) != 1 || !strings.Contains(e.withheld[0], `resource template "x://{id}" of upstream "b": also served by upstream "a"`) {
		t.Fatalf("withheld %q", e.withheld)
	}
}

func TestExposeMetaToolWithheld(t *testing.T) {
	t.Parallel()
	rt, snap, owner := unstarted(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "", []string{ToolView, "fine"}, []string{ToolView}, nil),
	}))
	e := rt.expose(emptyExposure(), snap, rt.upstreams(), owner, nil)
	if _, ok := e.tools[ToolView]; ok {
		t.Fatalf("a tool took the meta-tool's name: %v", e.tools)
	}
	if e.tools["fine"] == "" {
		t.Fatalf("other tools not exposed: %v", e.tools)
	}
	// Prompts live in another namespace: tool_view is a fine prompt name.
	if e.prompts[ToolView] == "" {
		t.Fatalf("prompt tool_view withheld: %v", e.prompts)
	}
	if len(e.withheld) != 1 || !strings.Contains(e.withheld[0], "meta-tool") {
		t.Fatalf("withheld %q", e.withheld)
	}
}

func TestGatewayExposeGlobs(t *testing.T) {
	t.Parallel()
	ups := func() []testUpstream {
		return []testUpstream{
			staticUpstream("a", "a_", []string{"search", "fetch"}, []string{"greet"}, nil),
			staticUpstream("b", "b_", []string{"search", "list"}, nil, nil),
		}
	}
	tests := []struct {
		name   string
		expose []string
		want   []string
	}{
		{"none", nil, nil},
		{"no match", []string{"nothing*"}, nil},
		// A tool_id carries its shape hash: a glob without it matches nothing.
		{"by tool_id without its hash", []string{"a:search"}, nil},
		{"by tool_id, any hash", []string{"a:search#*"}, []string{"a_search"}},
		{"by tool_id glob", []string{"b:*"}, []string{"b_list", "b_search"}},
		{"by upstream name", []string{"fetch"}, []string{"a_fetch"}},
		{"by upstream name, both upstreams", []string{"search"}, []string{"a_search", "b_search"}},
		{"by exposed name", []string{"b_list"}, []string{"b_list"}},
		{"by exposed name glob", []string{"a_*"}, []string{"a_fetch", "a_search"}},
		{"several globs", []string{"fetch", "b_l*"}, []string{"a_fetch", "b_list"}},
		{"everything", []string{"*"}, []string{"a_fetch", "a_search", "b_list", "b_search"}},
		{"a malformed glob matches nothing", []string{"["}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, err := newDirectRuntime(t, setup(t, config.ModeGateway, ups(), func(r *rig) { r.cfg.Expose.Direct = tc.expose }))
			if err != nil {
				t.Fatal(err)
			}
			st := rt.state.Load()
			if got := sortedNames(st.exp.tools); !slices.Equal(got, tc.want) {
				t.Fatalf("exposed %v, want %v", exposedTools(t, rt), tc.want)
			}
			// Gateway mode exposes tools only.
			if len(st.exp.prompts) != 0 || len(st.exp.resources) != 0 {
				t.Errorf("gateway mode exposed prompts %v resources %v", st.exp.prompts, st.exp.resources)
			}
			// The client lists the meta-tools and the exposed tools.
			cs := connect(t, context.Background(), rt)
			got := toolNames(t, cs)
			for _, m := range []string{ToolBrowse, ToolHydrate, ToolExecute, ToolView} {
				if !slices.Contains(got, m) {
					t.Errorf("meta-tool %s not listed: %v", m, got)
				}
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("exposed tool %s not listed: %v", w, got)
				}
			}
		})
	}
}

func TestGatewayExposeByExactID(t *testing.T) {
	t.Parallel()
	ups := []testUpstream{
		staticUpstream("a", "a_", []string{"search", "fetch"}, nil, nil),
		staticUpstream("b", "b_", []string{"search"}, nil, nil),
	}
	rt, err := newDirectRuntime(t, setup(t, config.ModeGateway, ups))
	if err != nil {
		t.Fatal(err)
	}
	id := idIn(t, rt.Snapshot(), "b", "search")
	rt, err = newDirectRuntime(t, setup(t, config.ModeGateway, ups, func(r *rig) { r.cfg.Expose.Direct = []string{id} }))
	if err != nil {
		t.Fatal(err)
	}
	if got := exposedTools(t, rt); !mapsEqual(got, map[string]string{"b_search": "b/search"}) {
		t.Fatalf("Expose [%s]: exposed %v", id, got)
	}
}

func TestGatewayExposeReservesMetaTools(t *testing.T) {
	t.Parallel()
	for _, name := range []string{ToolBrowse, ToolHydrate, ToolExecute, ToolView} {
		_, err := newDirectRuntime(t, setup(t, config.ModeGateway, []testUpstream{
			staticUpstream("a", "", []string{name}, nil, nil),
		}, func(r *rig) { r.cfg.Expose.Direct = []string{"*"} }))
		if err == nil || !strings.Contains(err.Error(), "meta-tool") {
			t.Errorf("exposing a tool named %s in gateway mode: Start = %v, want a meta-tool name collision", name, err)
		}
	}
}

// TestGatewayExposeReservesPrimitiveVerbs: gateway mode also lists
// resource_browse, resource_read, prompt_browse and prompt_get when the
// catalog has resources or prompts; an exposed upstream tool must not take
// (or later remove) one of those names.
func TestGatewayExposeReservesPrimitiveVerbs(t *testing.T) {
	t.Parallel()
	for _, name := range []string{ResourceBrowse, ResourceRead, PromptBrowse, PromptGet} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt, err := newDirectRuntime(t, setup(t, config.ModeGateway, []testUpstream{
				staticUpstream("a", "", []string{name}, []string{"greet"}, []string{"file:///r.txt"}),
			}, func(r *rig) { r.cfg.Expose.Direct = []string{name} }))
			if err != nil {
				if !strings.Contains(err.Error(), "name collision") {
					t.Fatal(err)
				}
				return // withheld: fine
			}
			if id, ok := rt.state.Load().exp.tools[name]; ok {
				// afterSwap then registers both under one name: whichever
				// is added last replaces the other, and removing one
				// removes both.
				t.Errorf("gateway mode exposed upstream tool %s (%s) under the name of its own %s verb, without withholding it", id, name, name)
			}
		})
	}
}

func TestMatchAny(t *testing.T) {
	t.Parallel()
	tests := []struct {
		globs []string
		names []string
		want  bool
	}{
		{nil, []string{"a"}, false},
		{[]string{"a"}, nil, false},
		{[]string{"*"}, []string{""}, true},
		{[]string{"*"}, []string{"anything"}, true},
		{[]string{"search"}, []string{"search"}, true},
		{[]string{"search"}, []string{"Search"}, false},
		{[]string{"search"}, []string{"a:search", "search_all"}, false},
		{[]string{"a:*"}, []string{"a:search"}, true},
		{[]string{"a:*"}, []string{"b:search", "a_search"}, false},
		{[]string{"x", "a:?earch"}, []string{"zzz", "a:search"}, true},
		{[]string{"[ab]_*"}, []string{"b_list"}, true},
		{[]string{"[^ab]_*"}, []string{"b_list"}, false},
		{[]string{"[!ab]_*"}, []string{"!_x"}, true}, // path.Match negates with ^ only
		// path.Match: * does not cross a slash.
		{[]string{"*"}, []string{"dir/tool"}, false},
		{[]string{"*/*"}, []string{"dir/tool"}, true},
		// A malformed glob matches nothing and does not stop the others.
		{[]string{"["}, []string{"["}, false},
		{[]string{"[", "b*"}, []string{"b1"}, true},
		{[]string{`\*`}, []string{"*"}, true},
		{[]string{`\*`}, []string{"x"}, false},
	}
	for _, tc := range tests {
		if got := matchAny(tc.globs, tc.names...); got != tc.want {
			t.Errorf("matchAny(%q, %q) = %v, want %v", tc.globs, tc.names, got, tc.want)
		}
	}
}

func TestVerbatim(t *testing.T) {
	t.Parallel()
	rt, err := newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{
		staticUpstream("a", "", []string{"x"}, nil, nil),
	}, func(r *rig) { r.cfg.Firewall.OffFor = []string{"a:loud*", "raw_*"} }))
	if err != nil {
		t.Fatal(err)
	}
	if rt.fw == nil {
		t.Fatal("Start left the firewall unset")
	}
	counter := rt.cards.Counter()
	var words []string
	for i := range 3000 {
		words = append(words, fmt.Sprintf("w%d", i*7919))
	}
	bigText := strings.Join(words, " ")
	if n := counter.Count(bigText); n <= 800 {
		t.Fatalf("the big text counts %d tokens only", n)
	}
	// Long in bytes, few in tokens: counted, and within the budget.
	longFew := strings.Repeat("                ", 100)
	if n := counter.Count(longFew); len(longFew) <= 800 || n > 800 {
		t.Fatalf("the long text: %d bytes, %d tokens", len(longFew), n)
	}
	item := &catalog.Item{ID: "a:x", UpstreamName: "x"}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	bin := func(n int) []byte { return make([]byte, n) }
	tests := []struct {
		name string
		it   *catalog.Item
		res  *mcp.CallToolResult
		want bool
	}{
		{"empty", item, &mcp.CallToolResult{}, true},
		{"small text", item, text("hello"), true},
		{"text at the byte budget", item, text(strings.Repeat("a", 800)), true},
		{"long text within the token budget", item, text(longFew), true},
		{"text over the token budget", item, text(bigText), false},
		{"text over the budget in pieces", item, &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: bigText[:len(bigText)/2]}, &mcp.TextContent{Text: bigText[len(bigText)/2:]}}}, false},
		{"structured content over the budget", item, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}},
			StructuredContent: map[string]any{"words": words}}, false},
		{"embedded resource text over the budget", item, &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "x://y", Text: bigText}}}}, false},
		{"image at the binary limit", item, &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: bin(directMaxBinary), MIMEType: "image/png"}}}, true},
		{"image over the binary limit", item, &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: bin(directMaxBinary + 1), MIMEType: "image/png"}}}, false},
		{"audio and image adding up over the limit", item, &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{Data: bin(directMaxBinary / 2), MIMEType: "image/png"},
			&mcp.AudioContent{Data: bin(directMaxBinary/2 + 1), MIMEType: "audio/wav"}}}, false},
		{"embedded blob over the limit", item, &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "x://y", Blob: bin(directMaxBinary + 1)}}}}, false},
		{"nil embedded resource", item, &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{}}}, true},
		{"firewall off for the tool id", &catalog.Item{ID: "a:loudest", UpstreamName: "z"}, text(bigText), true},
		{"firewall off for the upstream name", &catalog.Item{ID: "a:r", UpstreamName: "raw_dump"}, &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{Data: bin(directMaxBinary + 1)}}}, true},
		{"firewall off for another tool", &catalog.Item{ID: "b:loud", UpstreamName: "loud"}, text(bigText), false},
	}
	for _, tc := range tests {
		if got := rt.verbatim(tc.it, tc.res); got != tc.want {
			t.Errorf("%s: verbatim = %v, want %v", tc.name, got, tc.want)
		}
	}

	// A smaller inline budget.
	small, err := newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{staticUpstream("a", "", []string{"x"}, nil, nil)}, func(r *rig) { r.cfg.Firewall.MaxInlineTokens = 5 }))
	if err != nil {
		t.Fatal(err)
	}
	if !small.verbatim(item, text("hi")) {
		t.Error("budget 5: a two-token text is not verbatim")
	}
	if small.verbatim(item, text("one two three four five six seven eight nine ten")) {
		t.Error("budget 5: a ten-word text is verbatim")
	}

	// The firewall off: everything is verbatim.
	off, err := newDirectRuntime(t, setup(t, config.ModeDirect, []testUpstream{staticUpstream("a", "", []string{"x"}, nil, nil)}, func(r *rig) { r.cfg.Firewall.Enabled = !(true) }))
	if err != nil {
		t.Fatal(err)
	}
	if off.fw != nil {
		t.Fatal("FirewallOff left a firewall")
	}
	if !off.verbatim(item, text(bigText)) {
		t.Error("with the firewall off, a big text is not verbatim")
	}
}
