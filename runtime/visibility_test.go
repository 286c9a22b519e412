package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/toolid"
)

// visibilityFleet is three static upstreams: alpha (25 tools, enough to
// be clustered), beta (3 tools) and gamma (2 tools, 2 prompts, 2
// resources).
func visibilityFleet() []testUpstream {
	var alpha []string
	for i := range 25 {
		alpha = append(alpha, fmt.Sprintf("op_%02d", i))
	}
	return []testUpstream{
		staticUpstream("alpha", "", alpha, []string{"alpha_prompt"}, []string{"file:///alpha/readme"}),
		staticUpstream("beta", "", []string{"b_one", "b_two", "b_three"}, nil, nil),
		staticUpstream("gamma", "", []string{"gamma_secret", "gamma_export"}, []string{"gamma_prompt", "gamma_brief"}, []string{"file:///gamma/keys", "file:///gamma/notes"}),
	}
}

// aliceSees lets the local principal alice see beta, alpha's op_0x tools
// and alpha's prompt and resource, and nothing of gamma.
const aliceSees = `policy_id: vis
rules:
  - id: alice-beta
    effect: allow
    match: {principal: {sub: alice}, server: [beta]}
  - id: alice-alpha-some
    effect: allow
    match: {principal: {sub: alice}, tool_id: ["alpha:op_0*"]}
  - id: alice-alpha-primitives
    effect: allow
    match: {principal: {sub: alice}, server: [alpha], kind: [prompt, resource]}
`

func visibilityRig(t *testing.T, mode config.Mode, tweaks ...func(*rig)) rig {
	t.Helper()
	p, err := policy.Parse("vis.yaml", []byte(aliceSees))
	if err != nil {
		t.Fatal(err)
	}
	return setup(t, mode, visibilityFleet(), append([]func(*rig){func(r *rig) {
		r.cfg.Auth.Local.Sub = "alice"
		r.deps.Policy = p
	}}, tweaks...)...)
}

func cardIDs(m map[string]any) []string {
	var ids []string
	cards, _ := m["cards"].([]any)
	for _, c := range cards {
		ids = append(ids, c.(map[string]any)["id"].(string))
	}
	return ids
}

// browseAll pages through path with top_k k and returns every card.
func browseAll(t *testing.T, cs *mcp.ClientSession, tool, path string, k int) ([]map[string]any, int) {
	t.Helper()
	var out []map[string]any
	cursor, total := "", -1
	for range 100 {
		args := map[string]any{"path": path, "top_k": k}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res, m := call(t, cs, tool, args)
		if res.IsError {
			t.Fatalf("%s %s: %v", tool, path, m)
		}
		for _, c := range m["cards"].([]any) {
			out = append(out, c.(map[string]any))
		}
		n, _ := m["total"].(float64)
		if total >= 0 && int(n) != total {
			t.Fatalf("total changed between pages: %v then %v", total, n)
		}
		total = int(n)
		cursor, _ = m["next_cursor"].(string)
		if cursor == "" {
			return out, total
		}
	}
	t.Fatal("paging did not end")
	return nil, 0
}

// TestBrowseShowsOnlyVisible: tool_browse by path and by query,
// resource_browse and prompt_browse show a principal only what it may see:
// no namespace, card, count, description or cursor of an invisible item,
// and a path with nothing visible below it answers like one that does not
// exist (#15 finding 1).
func TestBrowseShowsOnlyVisible(t *testing.T) {
	for _, stable := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache_stable=%v", stable), func(t *testing.T) {
			testBrowseShowsOnlyVisible(t, stable)
		})
	}
}

func testBrowseShowsOnlyVisible(t *testing.T, stable bool) {
	rt, cs := startRuntime(t, visibilityRig(t, config.ModeGateway, func(r *rig) { r.cfg.Browse.CacheStable = stable }))
	hidden := []string{"gamma", "op_1", "op_2"}
	noHidden := func(what string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		for _, h := range hidden {
			if strings.Contains(string(b), h) {
				t.Fatalf("%s names %q: %s", what, h, b)
			}
		}
	}

	root, total := browseAll(t, cs, ToolBrowse, "/", 1)
	if total != 2 || len(root) != 2 || root[0]["id"] != "/alpha" || root[1]["id"] != "/beta" {
		t.Fatalf("root: total %d, cards %v", total, root)
	}
	noHidden("/", root)
	if d := root[0]["description"].(string); !strings.HasPrefix(d, "10 tools") {
		t.Fatalf("/alpha counts what alice cannot see: %q", d)
	}

	// Paging /alpha (clusters, then their leaves) finds exactly the ten
	// visible tools, and totals count visible children only.
	var leaves []string
	var walk func(path string)
	walk = func(path string) {
		cards, total := browseAll(t, cs, ToolBrowse, path, 2)
		if total != len(cards) {
			t.Fatalf("%s: total %d, %d cards", path, total, len(cards))
		}
		noHidden(path, cards)
		for _, c := range cards {
			if id := c["id"].(string); strings.HasPrefix(id, "/") {
				walk(id)
			} else {
				leaves = append(leaves, c["name"].(string))
			}
		}
	}
	walk("/alpha")
	slices.Sort(leaves)
	if want := []string{"op_00", "op_01", "op_02", "op_03", "op_04", "op_05", "op_06", "op_07", "op_08", "op_09"}; !slices.Equal(leaves, want) {
		t.Fatalf("alice's /alpha leaves %v, want %v", leaves, want)
	}

	// An invisible namespace, cluster or leaf reads like a missing path.
	st := rt.state.Load()
	g := st.router
	secret := idIn(t, st.snap, "gamma", "gamma_secret")
	leafPath, ok := pathOfTool(g, secret)
	if !ok {
		t.Fatal("no leaf path for gamma_secret")
	}
	for _, p := range []string{"/gamma", leafPath, "/alpha/" + hiddenCluster(t, rt)} {
		if p == "" {
			continue
		}
		m := wantError(t, cs, ToolBrowse, map[string]any{"path": p}, CodePathNotFound)
		missing := wantError(t, cs, ToolBrowse, map[string]any{"path": p + "zz"}, CodePathNotFound)
		if strings.ReplaceAll(m["message"].(string), p, "P") != strings.ReplaceAll(missing["message"].(string), p+"zz", "P") {
			t.Fatalf("hidden %s answers %v, a missing path %v", p, m, missing)
		}
		// A cursor on a hidden leaf is refused as on a missing path too.
		wantError(t, cs, ToolBrowse, map[string]any{"path": p, "cursor": "AAAAAQAAAAAAAAAA"}, CodePathNotFound)
	}

	// Query browse.
	_, m := call(t, cs, ToolBrowse, map[string]any{"query": "gamma secret export op", "top_k": 50})
	noHidden("query", m)
	if len(cardIDs(m)) == 0 {
		t.Fatal("the query found nothing visible")
	}

	// Resources and prompts.
	for _, tool := range []string{ResourceBrowse, PromptBrowse} {
		cards, total := browseAll(t, cs, tool, "/", 5)
		noHidden(tool, cards)
		if total != 1 || cards[0]["id"] != "/alpha" {
			t.Fatalf("%s /: %d %v", tool, total, cards)
		}
		wantError(t, cs, tool, map[string]any{"path": "/gamma"}, CodePathNotFound)
		_, m := call(t, cs, tool, map[string]any{"query": "gamma keys notes brief prompt"})
		noHidden(tool+" query", m)
	}
}

// pathOfTool is the leaf path of a tool in r's tool graph.
func pathOfTool(r interface {
	PathOf(toolid.Kind, string) (string, bool)
}, id string) (string, bool) {
	return r.PathOf(toolid.KindTool, id)
}

// hiddenCluster names a cluster of /alpha whose tools alice sees none of
// ("" when the graph made none).
func hiddenCluster(t *testing.T, rt *Runtime) string {
	t.Helper()
	st := rt.state.Load()
	page, err := st.router.Browse(toolid.KindTool, "/alpha", 50, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range page.Cards {
		if strings.HasPrefix(c.ID, "/alpha/") && !strings.Contains(c.Description, "op_0") {
			return strings.TrimPrefix(c.ID, "/alpha/")
		}
	}
	return ""
}

// sameAnswer fails unless two error answers are equal once the names
// they were asked about are replaced.
func sameAnswer(t *testing.T, what string, hidden map[string]any, hiddenName string, missing map[string]any, missingName string) {
	t.Helper()
	// "Did you mean" ranks the visible ids by their likeness to the name
	// asked for, so it differs between two names; it must never offer
	// the hidden item, and is otherwise left out of the comparison.
	details, _ := hidden["details"].(map[string]any)
	if dm, ok := details["did_you_mean"].([]any); ok {
		for _, id := range dm {
			if id == hiddenName {
				t.Fatalf("%s: the answer for a hidden item suggests it: %v", what, hidden)
			}
		}
	}
	h, _ := json.Marshal(withoutSuggestions(hidden))
	m, _ := json.Marshal(withoutSuggestions(missing))
	hs := strings.ReplaceAll(string(h), hiddenName, "NAME")
	ms := strings.ReplaceAll(string(m), missingName, "NAME")
	if hs != ms {
		t.Fatalf("%s: an invisible item answers %s, a missing one %s", what, h, m)
	}
}

// TestInvisibleAnswersLikeMissing: naming an item the caller may not see
// gets exactly the answer of a name that does not exist, through every
// door (#15 finding 7); the receipt keeps the true reason.
func TestInvisibleAnswersLikeMissing(t *testing.T) {
	buf := &syncBuffer{}
	rt, cs := startRuntime(t, visibilityRig(t, config.ModeGateway, func(r *rig) { r.deps.ReceiptsCopy = buf }))
	st := rt.state.Load()
	secret := idIn(t, st.snap, "gamma", "gamma_secret")
	missing := "gamma:gamma_nosuch#12345678"
	for _, tool := range []string{ToolExecute, ToolHydrate} {
		args := func(id string) map[string]any {
			if tool == ToolExecute {
				return map[string]any{"tool_id": id, "args": map[string]any{"q": "x"}}
			}
			return map[string]any{"tool_id": id}
		}
		h := wantError(t, cs, tool, args(secret), CodeHydrateFailed)
		m := wantError(t, cs, tool, args(missing), CodeHydrateFailed)
		sameAnswer(t, tool, h, secret, m, missing)
	}
	var prompt, resource string
	for _, it := range st.snap.Items(toolid.KindPrompt) {
		if it.Server == "gamma" {
			prompt = it.ID
		}
	}
	for _, it := range st.snap.Items(toolid.KindResource) {
		if it.Server == "gamma" {
			resource = it.ID
		}
	}
	h := wantError(t, cs, PromptGet, map[string]any{"prompt_id": prompt}, CodePromptNotFound)
	m := wantError(t, cs, PromptGet, map[string]any{"prompt_id": "prompt::gamma/nosuch"}, CodePromptNotFound)
	sameAnswer(t, PromptGet, h, prompt, m, "prompt::gamma/nosuch")
	h = wantError(t, cs, ResourceRead, map[string]any{"resource_id": resource}, CodeResourceNotFound)
	m = wantError(t, cs, ResourceRead, map[string]any{"resource_id": "resource::gamma/nosuch"}, CodeResourceNotFound)
	sameAnswer(t, ResourceRead, h, resource, m, "resource::gamma/nosuch")

	// The receipts say what really happened.
	var concealed int
	for _, rc := range receiptsOf(t, rt, buf) {
		if rc.Decision.Result == "deny" && slices.Contains(rc.Decision.ReasonCodes, ReasonConcealed) {
			if rc.MCP.ServerID != "gamma" || rc.Decision.PolicyID != "vis" {
				t.Fatalf("concealed receipt: %+v", rc)
			}
			concealed++
		}
	}
	if concealed != 4 {
		t.Fatalf("%d receipts record a concealed item, want 4", concealed)
	}
}

// TestInvisibleDirectAnswersLikeMissing: in direct and proxy mode a call
// of a listed name the caller may not see gets the go-sdk's own refusal of
// a name it does not list.
func TestInvisibleDirectAnswersLikeMissing(t *testing.T) {
	ctx := context.Background()
	protocolErr := func(err error, name string) string {
		if err == nil {
			t.Fatalf("a call of %q succeeded", name)
		}
		return strings.ReplaceAll(err.Error(), name, "NAME")
	}
	t.Run("direct", func(t *testing.T) {
		_, cs := startRuntime(t, visibilityRig(t, config.ModeDirect))
		if names := toolNames(t, cs); slices.Contains(names, "gamma_secret") || !slices.Contains(names, "b_one") {
			t.Fatalf("direct listing: %v", names)
		}
		_, errH := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gamma_secret", Arguments: map[string]any{}})
		_, errM := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gamma_nosuch", Arguments: map[string]any{}})
		if h, m := protocolErr(errH, "gamma_secret"), protocolErr(errM, "gamma_nosuch"); h != m {
			t.Fatalf("tool: %s vs %s", h, m)
		}
		_, errH = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "gamma_prompt"})
		_, errM = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "gamma_nosuch"})
		if h, m := protocolErr(errH, "gamma_prompt"), protocolErr(errM, "gamma_nosuch"); h != m {
			t.Fatalf("prompt: %s vs %s", h, m)
		}
		_, errH = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///gamma/keys"})
		_, errM = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///gamma/nosuch"})
		if h, m := protocolErr(errH, "file:///gamma/keys"), protocolErr(errM, "file:///gamma/nosuch"); h != m {
			t.Fatalf("resource: %s vs %s", h, m)
		}
	})
	t.Run("proxy", func(t *testing.T) {
		rt, cs := startRuntime(t, visibilityRig(t, config.ModeProxy))
		wire, _ := rt.state.Load().snap.WireName(idIn(t, rt.state.Load().snap, "gamma", "gamma_secret"))
		_, errH := cs.CallTool(ctx, &mcp.CallToolParams{Name: wire, Arguments: map[string]any{}})
		_, errM := cs.CallTool(ctx, &mcp.CallToolParams{Name: wire + "x", Arguments: map[string]any{}})
		if h, m := protocolErr(errH, wire), protocolErr(errM, wire+"x"); h != m {
			t.Fatalf("stripped: %s vs %s", h, m)
		}
	})
}

// TestProdHidesUnclassified: in prod a tool no manifest classifies is not
// listed, browsed or hydrated, and a call of it answers like a missing
// tool; in dev it stays visible (#15 finding 6).
func TestProdHidesUnclassified(t *testing.T) {
	rt, cs, _ := guardedAlpha(t, nil)
	whoami, add := idOf(t, rt, "alpha", "whoami"), idOf(t, rt, "alpha", "add")
	_, m := call(t, cs, ToolBrowse, map[string]any{"query": "whoami who am i", "top_k": 50})
	if ids := cardIDs(m); slices.Contains(ids, whoami) {
		t.Fatalf("prod query browse shows the unclassified tool: %v", ids)
	}
	cards, _ := browseAll(t, cs, ToolBrowse, "/alpha", 50)
	var ids []string
	for _, c := range cards {
		ids = append(ids, c["id"].(string))
	}
	if slices.Contains(ids, whoami) || !slices.Contains(ids, add) {
		t.Fatalf("prod /alpha: %v", ids)
	}
	h := wantError(t, cs, ToolHydrate, map[string]any{"tool_id": whoami}, CodeHydrateFailed)
	mm := wantError(t, cs, ToolHydrate, map[string]any{"tool_id": "alpha:nosuch#00000000"}, CodeHydrateFailed)
	sameAnswer(t, ToolHydrate, h, whoami, mm, "alpha:nosuch#00000000")
	h = wantError(t, cs, ToolExecute, map[string]any{"tool_id": whoami}, CodeHydrateFailed)
	mm = wantError(t, cs, ToolExecute, map[string]any{"tool_id": "alpha:nosuch#00000000"}, CodeHydrateFailed)
	sameAnswer(t, ToolExecute, h, whoami, mm, "alpha:nosuch#00000000")

	// Direct listing in prod, and dev unchanged.
	for _, env := range []guard.Environment{guard.EnvProd, guard.EnvDev} {
		rt, cs, _ := guardedAlpha(t, func(r *rig) { r.cfg.Mode, r.cfg.Environment = config.ModeDirect, env })
		_ = rt
		names := toolNames(t, cs)
		if got, want := slices.Contains(names, "whoami"), env == guard.EnvDev; got != want {
			t.Fatalf("%s: whoami listed %v, want %v (%v)", env, got, want, names)
		}
	}
	_, cs = startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha")}))
	if res, m := call(t, cs, ToolHydrate, map[string]any{"tool_id": whoami}); res.IsError {
		t.Fatalf("dev hides the unclassified tool: %v", m)
	}
}

// withoutSuggestions is an error answer without its "did you mean" part.
func withoutSuggestions(m map[string]any) map[string]any {
	out := maps.Clone(m)
	if msg, ok := out["message"].(string); ok {
		if i := strings.Index(msg, "; did you mean "); i >= 0 {
			out["message"] = msg[:i]
		}
	}
	if d, ok := out["details"].(map[string]any); ok {
		d = maps.Clone(d)
		delete(d, "did_you_mean")
		if len(d) == 0 {
			delete(out, "details")
		} else {
			out["details"] = d
		}
	}
	return out
}

// TestPrimitiveVerbsOfNothingVisible: the resource and prompt verbs are
// listed and callable only for a caller who may see a resource or a
// prompt; to another they answer like a tool nobody lists.
func TestPrimitiveVerbsOfNothingVisible(t *testing.T) {
	p, err := policy.Parse("vis.yaml", []byte(`policy_id: tools-only
rules:
  - id: alice-beta
    effect: allow
    match: {principal: {sub: alice}, server: [beta]}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, cs := startRuntime(t, setup(t, config.ModeGateway, visibilityFleet(), func(r *rig) {
		r.cfg.Auth.Local.Sub = "alice"
		r.deps.Policy = p
	}))
	names := toolNames(t, cs)
	for _, v := range []string{ResourceBrowse, ResourceRead, PromptBrowse, PromptGet} {
		if slices.Contains(names, v) {
			t.Fatalf("%s listed to a caller who sees no resource or prompt: %v", v, names)
		}
		_, errV := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: v, Arguments: map[string]any{"path": "/"}})
		_, errM := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nosuch_verb", Arguments: map[string]any{"path": "/"}})
		if errV == nil || errM == nil || strings.ReplaceAll(errV.Error(), v, "V") != strings.ReplaceAll(errM.Error(), "nosuch_verb", "V") {
			t.Fatalf("%s: %v; a tool nobody lists: %v", v, errV, errM)
		}
	}
	if !slices.Contains(names, ToolBrowse) {
		t.Fatalf("tool_browse not listed: %v", names)
	}
	// alice of the other rig sees alpha's prompt and resource: listed.
	_, cs = startRuntime(t, visibilityRig(t, config.ModeGateway))
	if names := toolNames(t, cs); !slices.Contains(names, ResourceBrowse) || !slices.Contains(names, PromptGet) {
		t.Fatalf("verbs not listed to a caller who sees resources and prompts: %v", names)
	}
}

// TestKilledToolIsHiddenNotConcealed: a kill rule hides a tool from
// discovery (tool_hydrate answers like a missing tool) while a call of it
// says why it is refused (POLICY_DENIED with the kill rule): the policy
// lets the caller know the tool.
func TestKilledToolIsHiddenNotConcealed(t *testing.T) {
	rt, cs, _ := guardedAlpha(t, nil)
	add := idOf(t, rt, "alpha", "add")
	if _, err := rt.auth.incident.AddKill(context.Background(), policy.KillRule{Server: []string{"alpha"}}); err != nil {
		t.Fatal(err)
	}
	wantError(t, cs, ToolHydrate, map[string]any{"tool_id": add}, CodeHydrateFailed)
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}}, CodePolicyDenied)
	if b, _ := json.Marshal(m["details"]); !strings.Contains(string(b), "kill_rule:") {
		t.Fatalf("no kill rule among the reasons: %v", m)
	}
}
