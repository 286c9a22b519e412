package runtime

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
)

// twinFleet is the static fleet plus a server with two tools whose names
// fit the id grammar alike ("echo text", "echo/text": both echo_text),
// two ids under one short name.
func twinFleet(t *testing.T) []testUpstream {
	t.Helper()
	ups := staticFleet(t)
	twins := &catalog.Source{Tools: []catalog.ToolDef{
		{Server: "twins", Name: "echo text", Description: "Echo a text.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		{Server: "twins", Name: "echo/text", Description: "Echo a number.", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`)},
	}}
	u := newUpstream("twins")
	u.TrustLevel, u.Risk = config.TrustVerified, config.RiskLow
	return append(ups, testUpstream{cfg: u, src: twins})
}

// TestShortToolNames: tool_hydrate and tool_execute take "server:name" and
// the proxy listing's "server.name" for the one tool they stand for, and
// answer with its full tool_id; an ambiguous short name lists its
// candidates; a name that matches nothing suggests the closest ids.
func TestShortToolNames(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, twinFleet(t)))
	add := idOf(t, rt, "math", "add")
	for _, ref := range []string{add, "math:add", "math.add"} {
		_, h := call(t, cs, ToolHydrate, map[string]any{"tool_id": ref})
		if h["id"] != add {
			t.Fatalf("hydrate(%q) answered id %v, want %s", ref, h["id"], add)
		}
	}
	// tool_execute resolves the same way: the dry run's envelope names
	// the full id.
	_, env := call(t, cs, ToolExecute, map[string]any{"tool_id": "math:add", "args": map[string]any{"a": 1, "b": 2}, "dry_run": true})
	if env["tool_id"] != add {
		t.Fatalf("execute(math:add) dry run: %v", env)
	}

	m := wantError(t, cs, ToolHydrate, map[string]any{"tool_id": "twins:echo_text"}, CodeHydrateFailed)
	cands, _ := m["details"].(map[string]any)["candidates"].([]any)
	if len(cands) != 2 || !strings.Contains(m["message"].(string), "names 2 tools") {
		t.Fatalf("ambiguous short name: %v", m)
	}
	for _, c := range cands {
		if it, ok := rt.Snapshot().Lookup(c.(string)); !ok || it.Server != "twins" {
			t.Fatalf("candidate %v is no twins tool", c)
		}
	}
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": "twins:echo_text", "args": map[string]any{}}, CodeHydrateFailed)

	for _, c := range []struct {
		ref  string
		want string
	}{
		{"math:ad", add},
		{"github:create_isue", idOf(t, rt, "github", "create_issue")},
		{"math:add#00000000", add},
		{"weather:forecast", idOf(t, rt, "weather", "get_forecast")},
	} {
		for _, tool := range []string{ToolHydrate, ToolExecute} {
			m := wantError(t, cs, tool, argsFor(tool, c.ref), CodeHydrateFailed)
			d, _ := m["details"].(map[string]any)["did_you_mean"].([]any)
			if len(d) == 0 || len(d) > maxSuggestions || d[0] != c.want {
				t.Fatalf("%s(%q): did_you_mean %v, want %s first", tool, c.ref, d, c.want)
			}
			if !strings.Contains(m["message"].(string), "did you mean "+c.want) {
				t.Fatalf("%s(%q): message %q", tool, c.ref, m["message"])
			}
		}
	}
	// Nothing close: no suggestion, the plain error.
	m = wantError(t, cs, ToolHydrate, map[string]any{"tool_id": "zzz:qqq"}, CodeHydrateFailed)
	if d, _ := m["details"].(map[string]any); d["did_you_mean"] != nil {
		t.Fatalf("suggestions for a name like nothing: %v", m)
	}
}

// TestShortToolNamesFiltered: short names resolve, and suggestions are
// drawn, among the tools the caller may see only: a hidden tool's short
// name reads like a missing one, and no error names a hidden id.
func TestShortToolNamesFiltered(t *testing.T) {
	p, err := policy.Parse("p.yaml", []byte(`policy_id: local
rules:
  - id: alice-math
    effect: allow
    match: {principal: {sub: alice, issuer: local}, server: [math, twins]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, twinFleet(t), func(r *rig) { r.cfg.Auth.Local.Sub = "alice"; r.deps.Policy = p }))
	hidden := idOf(t, rt, "github", "create_issue")
	for _, tool := range []string{ToolHydrate, ToolExecute} {
		refs := []string{"github:create_issue", "github.create_issue", "github:create_isue", "math:create_issue"}
		if tool == ToolHydrate {
			// tool_execute judges an exact id by the policy (POLICY_DENIED).
			refs = append(refs, hidden)
		}
		for _, ref := range refs {
			m := wantError(t, cs, tool, argsFor(tool, ref), CodeHydrateFailed)
			b, _ := json.Marshal(m)
			if strings.Contains(string(b), "github:") && !strings.Contains(ref, "github") {
				t.Fatalf("%s(%q) names a hidden tool: %s", tool, ref, b)
			}
			for _, s := range suggestionsOf(m) {
				if strings.HasPrefix(s, "github:") {
					t.Fatalf("%s(%q) suggests hidden %s: %s", tool, ref, s, b)
				}
			}
		}
	}
	// The visible short name still resolves.
	_, h := call(t, cs, ToolHydrate, map[string]any{"tool_id": "math:multiply"})
	if h["id"] != idOf(t, rt, "math", "multiply") {
		t.Fatalf("hydrate(math:multiply) = %v", h)
	}
	// A twin hidden from alice would make a short name unambiguous, never
	// leak: both twins are visible here, so it stays ambiguous.
	m := wantError(t, cs, ToolHydrate, map[string]any{"tool_id": "twins:echo_text"}, CodeHydrateFailed)
	if c, _ := m["details"].(map[string]any)["candidates"].([]any); len(c) != 2 {
		t.Fatalf("twins:echo_text: %v", m)
	}
}

func suggestionsOf(m map[string]any) []string {
	var out []string
	d, _ := m["details"].(map[string]any)
	for _, key := range []string{"did_you_mean", "candidates"} {
		l, _ := d[key].([]any)
		for _, s := range l {
			out = append(out, s.(string))
		}
	}
	slices.Sort(out)
	return out
}

// argsFor are the arguments naming ref to tool_hydrate or tool_execute.
func argsFor(tool, ref string) map[string]any {
	if tool == ToolExecute {
		return map[string]any{"tool_id": ref, "args": map[string]any{}}
	}
	return map[string]any{"tool_id": ref}
}
