package runtime

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/toolid"
)

// sep986 is the tool-name grammar of SEP-986, which the TypeScript SDK
// checks.
var sep986 = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// strippedNames lists proxy mode's stripped entries (everything but the
// meta-tools and the resource and prompt verbs), in listing order.
func strippedNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	meta := []string{ToolHydrate, ToolExecute, ToolView, ResourceBrowse, ResourceRead, PromptBrowse, PromptGet}
	var out []string
	for _, n := range toolNames(t, cs) {
		if !slices.Contains(meta, n) {
			out = append(out, n)
		}
	}
	return out
}

// wireOf is the name proxy mode lists the tool id under.
func wireOf(t *testing.T, rt *Runtime, id string) string {
	t.Helper()
	w, ok := rt.Snapshot().WireName(id)
	if !ok {
		t.Fatalf("%s has no wire name", id)
	}
	return w
}

// TestProxyWireNames: every stripped entry is named within SEP-986, the
// names map one to one onto the catalog's tools, and they stay the same
// across a rebuild and between listings.
func TestProxyWireNames(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeProxy, append(staticFleet(t), liveUpstream("alpha"))))
	names := strippedNames(t, cs)
	snap := rt.Snapshot()
	tools := snap.Items(toolid.KindTool)
	if len(names) != len(tools) {
		t.Fatalf("%d stripped entries for %d tools: %v", len(names), len(tools), names)
	}
	ids := map[string]string{}
	for _, n := range names {
		if !sep986.MatchString(n) || strings.ContainsAny(n, ":#") {
			t.Fatalf("entry %q is outside SEP-986", n)
		}
		it, ok := snap.LookupWire(n)
		if !ok {
			t.Fatalf("entry %q maps to no tool", n)
		}
		if prev, dup := ids[it.ID]; dup {
			t.Fatalf("%s is listed as %q and %q", it.ID, prev, n)
		}
		ids[it.ID] = n
		if w, _ := snap.WireName(it.ID); w != n {
			t.Fatalf("%s: listed as %q, WireName says %q", it.ID, n, w)
		}
	}
	for _, it := range tools {
		if _, ok := ids[it.ID]; !ok {
			t.Fatalf("%s is not listed", it.ID)
		}
	}
	if again := strippedNames(t, cs); !slices.Equal(again, names) {
		t.Fatalf("a second listing differs:\n%v\n%v", names, again)
	}
	rt.markDirty("fleet")
	select {
	case <-rt.Rebuilt():
	case <-time.After(10 * time.Second):
		t.Fatal("no rebuild")
	}
	if after := strippedNames(t, cs); !slices.Equal(after, names) {
		t.Fatalf("a rebuild renamed the entries:\n%v\n%v", names, after)
	}
}

// TestProxyCallsByWireName: tool_hydrate and tool_execute take the listed
// name wherever they take a tool_id, and answer with the real tool_id; a
// direct call of an entry is refused with both names.
func TestProxyCallsByWireName(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeProxy, []testUpstream{liveUpstream("alpha")}))
	id := idOf(t, rt, "alpha", "echo")
	wire := wireOf(t, rt, id)
	if !slices.Contains(strippedNames(t, cs), wire) {
		t.Fatalf("%s is not listed", wire)
	}

	_, h := call(t, cs, ToolHydrate, map[string]any{"tool_id": wire})
	if h["id"] != id || h["name"] != "echo" {
		t.Fatalf("hydrate(%s) = %v", wire, h)
	}
	res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": wire, "args": map[string]any{"text": "by wire name"}})
	if res.IsError || env["status"] != "ok" {
		t.Fatalf("execute(%s) = %v", wire, env)
	}
	if prov := env["provenance"].(map[string]any); prov["tool_id"] != id || prov["upstream_name"] != "echo" {
		t.Fatalf("provenance = %v", prov)
	}
	// The tool_id itself still works.
	if res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": id, "args": map[string]any{"text": "by id"}}); res.IsError {
		t.Fatalf("execute(%s) = %v", id, env)
	}

	m := wantError(t, cs, wire, map[string]any{"text": "direct"}, CodeArgsInvalid)
	if msg := m["message"].(string); !strings.Contains(msg, id) || !strings.Contains(msg, wire) {
		t.Fatalf("the refusal does not name %s and %s: %q", id, wire, msg)
	}
	if d, _ := m["details"].(map[string]any); d["tool_id"] != id || d["name"] != wire {
		t.Fatalf("details = %v", m["details"])
	}

	// A name that is no tool's fails closed, with the real codes.
	wantError(t, cs, ToolHydrate, map[string]any{"tool_id": "alpha.echo.0000000000"}, CodeHydrateFailed)
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": "alpha.echo.0000000000", "args": map[string]any{}}, CodeHydrateFailed)
}

// TestProxyWireNamesFiltered: identity-filtered discovery hides the
// entries of tools the caller may not see, and their wire names read like
// missing ones to tool_hydrate.
func TestProxyWireNamesFiltered(t *testing.T) {
	p, err := policy.Parse("p.yaml", []byte(`policy_id: local
rules:
  - id: alice-math
    effect: allow
    match: {principal: {sub: alice, issuer: local}, server: [math]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, cs := startRuntime(t, setup(t, config.ModeProxy, staticFleet(t), func(r *rig) { r.cfg.Auth.Local.Sub = "alice"; r.deps.Policy = p }))
	var want []string
	var hidden string
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		switch it.Server {
		case "math":
			want = append(want, wireOf(t, rt, it.ID))
		case "github":
			hidden = wireOf(t, rt, it.ID)
		}
	}
	got := strippedNames(t, cs)
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("alice sees %v, want %v", got, want)
	}
	wantError(t, cs, ToolHydrate, map[string]any{"tool_id": hidden}, CodeHydrateFailed)
	_, h := call(t, cs, ToolHydrate, map[string]any{"tool_id": want[0]})
	if it, _ := rt.Snapshot().LookupWire(want[0]); h["id"] != it.ID {
		t.Fatalf("hydrate(%s) = %v", want[0], h)
	}
}

// TestCacheStableHydrateByWireName: a hydration by wire name enters the
// tool_id into the session's cache-stable seen set (spec 003 §5), as one
// by tool_id does.
func TestCacheStableHydrateByWireName(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t), func(r *rig) { r.cfg.Browse.CacheStable = true }))
	var add string
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		if it.Server == "math" && it.UpstreamName == "add" {
			add = it.ID
		}
	}
	call(t, cs, ToolHydrate, map[string]any{"tool_id": wireOf(t, rt, add)})
	_, m := call(t, cs, ToolBrowse, map[string]any{"query": "add two numbers; create github issue", "top_k": 4})
	var ids []string
	for _, c := range m["cards"].([]any) {
		ids = append(ids, c.(map[string]any)["id"].(string))
	}
	brk := slices.Index(ids, "__cache_breakpoint__")
	if at := slices.Index(ids, add); at < 0 || brk < 0 || at > brk {
		t.Fatalf("after hydrating %s by wire name, browse = %v", add, ids)
	}
}
