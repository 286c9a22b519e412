package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/protocol"
)

// listedPrompts, listedResources and listedTemplates page through a list
// method by hand, checking every page's caching hints against ttl and
// scope, and return what was listed in order and the number of pages.
func listedPrompts(t *testing.T, cs *mcp.ClientSession, ttl int, scope string) ([]string, int) {
	t.Helper()
	var out []string
	cursor, pages := "", 0
	for {
		res, err := cs.ListPrompts(context.Background(), &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		pages++
		wantHints(t, "prompts/list", res.Cacheable, ttl, scope)
		for _, p := range res.Prompts {
			out = append(out, p.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			return out, pages
		}
	}
}

func listedResources(t *testing.T, cs *mcp.ClientSession, ttl int, scope string) ([]string, int) {
	t.Helper()
	var out []string
	cursor, pages := "", 0
	for {
		res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		pages++
		wantHints(t, "resources/list", res.Cacheable, ttl, scope)
		for _, r := range res.Resources {
			out = append(out, r.URI)
		}
		if cursor = res.NextCursor; cursor == "" {
			return out, pages
		}
	}
}

func listedTemplates(t *testing.T, cs *mcp.ClientSession, ttl int, scope string) []string {
	t.Helper()
	res, err := cs.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatalf("resources/templates/list: %v", err)
	}
	wantHints(t, "resources/templates/list", res.Cacheable, ttl, scope)
	var out []string
	for _, r := range res.ResourceTemplates {
		out = append(out, r.URITemplate)
	}
	return out
}

func wantHints(t *testing.T, what string, c mcp.Cacheable, ttl int, scope string) {
	t.Helper()
	if c.TTLMs != ttl || c.CacheScope != scope {
		t.Fatalf("%s: ttlMs %d, cacheScope %q; want %d, %q", what, c.TTLMs, c.CacheScope, ttl, scope)
	}
}

// sameRefusal checks that asking for what the caller may not see fails
// exactly as asking for what does not exist, names aside.
func sameRefusal(t *testing.T, what string, hidden, missing error, hiddenName, missingName string) {
	t.Helper()
	if hidden == nil || missing == nil {
		t.Fatalf("%s: hidden %v, missing %v: want both refused", what, hidden, missing)
	}
	h := strings.ReplaceAll(hidden.Error(), hiddenName, "N")
	m := strings.ReplaceAll(missing.Error(), missingName, "N")
	if h != m {
		t.Fatalf("%s: a hidden item answers %q, a missing one %q", what, hidden, missing)
	}
	var je *jsonrpc.Error
	if errors.As(hidden, &je) && je.Code == jsonrpc.CodeMethodNotFound {
		t.Fatalf("%s: -32601 for a declared capability: %v", what, hidden)
	}
}

// TestPrimitiveListsByMode: gateway and proxy mode declare prompts and
// resources, so their list methods never answer -32601. A gateway's lists
// are empty (resource_browse and prompt_browse find them) and cacheable for
// DefaultListTTL, as they change only with the configuration; proxy mode
// lists the catalog's prompts and resources in a deterministic order,
// stale at once (they follow the fleet), and reads them through the direct
// path. Both are private to the caller: the incident state can hide items
// per caller even without a policy (as for tools/list).
func TestPrimitiveListsByMode(t *testing.T) {
	stableTTL := int(protocol.DefaultListTTL.Milliseconds())
	t.Run("gateway", func(t *testing.T) {
		_, cs := startRuntime(t, setup(t, config.ModeGateway, visibilityFleet()))
		caps := cs.InitializeResult().Capabilities
		// Nothing to subscribe to or to be told of changes of.
		if caps.Prompts == nil || caps.Resources == nil || caps.Prompts.ListChanged || caps.Resources.ListChanged || caps.Resources.Subscribe {
			t.Fatalf("capabilities: prompts %+v, resources %+v", caps.Prompts, caps.Resources)
		}
		if p, _ := listedPrompts(t, cs, stableTTL, "private"); len(p) != 0 {
			t.Fatalf("prompts/list = %v", p)
		}
		if r, _ := listedResources(t, cs, stableTTL, "private"); len(r) != 0 {
			t.Fatalf("resources/list = %v", r)
		}
		if r := listedTemplates(t, cs, stableTTL, "private"); len(r) != 0 {
			t.Fatalf("resources/templates/list = %v", r)
		}
		// The catalog's prompts and resources are not served by name in
		// gateway mode: prompt_get and resource_read are the doors.
		ctx := context.Background()
		_, errP := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha_prompt"})
		_, errM := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nosuch"})
		sameRefusal(t, "prompts/get", errP, errM, "alpha_prompt", "nosuch")
		_, errR := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///alpha/readme"})
		_, errM = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///nosuch"})
		sameRefusal(t, "resources/read", errR, errM, "file:///alpha/readme", "file:///nosuch")
	})
	t.Run("proxy", func(t *testing.T) {
		_, cs := startRuntime(t, setup(t, config.ModeProxy, visibilityFleet()))
		caps := cs.InitializeResult().Capabilities
		if caps.Prompts == nil || caps.Resources == nil || !caps.Prompts.ListChanged || !caps.Resources.ListChanged {
			t.Fatalf("capabilities: prompts %+v, resources %+v", caps.Prompts, caps.Resources)
		}
		p, _ := listedPrompts(t, cs, 0, "private")
		if want := []string{"alpha_prompt", "gamma_brief", "gamma_prompt"}; !slices.Equal(p, want) {
			t.Fatalf("prompts/list = %v, want %v", p, want)
		}
		r, _ := listedResources(t, cs, 0, "private")
		if want := []string{"file:///alpha/readme", "file:///gamma/keys", "file:///gamma/notes"}; !slices.Equal(r, want) {
			t.Fatalf("resources/list = %v, want %v", r, want)
		}
		if again, _ := listedPrompts(t, cs, 0, "private"); !slices.Equal(again, p) {
			t.Fatalf("a second listing differs: %v, %v", p, again)
		}
		listedTemplates(t, cs, 0, "private")
		ctx := context.Background()
		gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "gamma_brief"})
		if err != nil || len(gp.Messages) != 1 || !strings.Contains(fmt.Sprint(gp.Messages[0].Content), "gamma_brief") {
			t.Fatalf("prompts/get gamma_brief = %v, %v", gp, err)
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///gamma/notes"})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "x" {
			t.Fatalf("resources/read = %v, %v", rr, err)
		}
		_, errP := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nosuch"})
		var je *jsonrpc.Error
		if !errors.As(errP, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("prompts/get of a missing prompt: %v", errP)
		}
	})
}

// TestPrimitiveListsVisibility: in proxy mode a caller lists, reads and
// renders only what the policy lets it see; what it may not see answers
// exactly as what does not exist, and the lists are private to the caller
// (cacheScope), since discovery is filtered by identity.
func TestPrimitiveListsVisibility(t *testing.T) {
	_, cs := startRuntime(t, visibilityRig(t, config.ModeProxy))
	p, _ := listedPrompts(t, cs, 0, "private")
	if !slices.Equal(p, []string{"alpha_prompt"}) {
		t.Fatalf("prompts/list = %v", p)
	}
	r, _ := listedResources(t, cs, 0, "private")
	if !slices.Equal(r, []string{"file:///alpha/readme"}) {
		t.Fatalf("resources/list = %v", r)
	}
	ctx := context.Background()
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///alpha/readme"}); err != nil {
		t.Fatalf("read a visible resource: %v", err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha_prompt"}); err != nil {
		t.Fatalf("get a visible prompt: %v", err)
	}
	_, errH := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///gamma/keys"})
	_, errM := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///gamma/nosuch"})
	sameRefusal(t, "resources/read", errH, errM, "file:///gamma/keys", "file:///gamma/nosuch")
	_, errH = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "gamma_prompt"})
	_, errM = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "gamma_nosuch"})
	sameRefusal(t, "prompts/get", errH, errM, "gamma_prompt", "gamma_nosuch")
	_, errH = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "gamma_prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "x", Value: "a"}})
	if errH == nil {
		t.Fatal("completion of a hidden prompt")
	}
}

// TestPrimitiveListsPaginate: more resources and prompts than a page holds
// are listed over several pages, each in the same deterministic order,
// with what the caller may not see removed from every page and nothing
// listed twice.
func TestPrimitiveListsPaginate(t *testing.T) {
	// Two upstreams whose URIs and names interleave, so that every page
	// holds some of each; alice sees pub only.
	const n = mcp.DefaultPageSize*3/4 + 1
	var pubURIs, secURIs, pubPrompts, secPrompts []string
	for i := range n {
		pubURIs = append(pubURIs, fmt.Sprintf("file:///r/%05d", 2*i))
		secURIs = append(secURIs, fmt.Sprintf("file:///r/%05d", 2*i+1))
		pubPrompts = append(pubPrompts, fmt.Sprintf("p%05d", 2*i))
		secPrompts = append(secPrompts, fmt.Sprintf("p%05d", 2*i+1))
	}
	pol, err := policy.Parse("pub.yaml", []byte(`policy_id: pub
rules:
  - id: alice-pub
    effect: allow
    match: {principal: {sub: alice}, server: [pub]}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, cs := startRuntime(t, setup(t, config.ModeProxy, []testUpstream{
		staticUpstream("pub", "", []string{"pub_tool"}, pubPrompts, pubURIs),
		staticUpstream("sec", "", []string{"sec_tool"}, secPrompts, secURIs),
	}, func(r *rig) {
		r.cfg.Auth.Local.Sub = "alice"
		r.deps.Policy = pol
	}))
	uris, pages := listedResources(t, cs, 0, "private")
	if pages < 2 {
		t.Fatalf("%d resources on %d page(s)", len(uris), pages)
	}
	if !slices.Equal(uris, pubURIs) {
		t.Fatalf("resources/list: %d URIs, want the %d of pub in order (first %v)", len(uris), len(pubURIs), uris[:min(3, len(uris))])
	}
	names, pages := listedPrompts(t, cs, 0, "private")
	if pages < 2 || !slices.Equal(names, pubPrompts) {
		t.Fatalf("prompts/list: %d names on %d pages, want the %d of pub in order", len(names), pages, len(pubPrompts))
	}
}

// TestProxyExpose: expose.direct works in proxy mode as in gateway mode:
// a matching tool is listed once, under its exposed name with its real
// schema instead of its stripped entry, and a call by that name runs the
// tool_execute pipeline (validation, policy, receipts); the other tools
// keep their stripped entries, and tool_execute still takes the exposed
// tool's wire name.
func TestProxyExpose(t *testing.T) {
	pol, err := policy.Parse("expose.yaml", []byte(`policy_id: expose
rules:
  - id: echo-and-add-listed
    effect: allow
    match: {tool_id: ["alpha:echo#*", "alpha:add#*"], action: [list]}
  - id: echo-called
    effect: allow
    match: {tool_id: ["alpha:echo#*"], action: [call]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, cs := startRuntime(t, setup(t, config.ModeProxy, []testUpstream{liveUpstream("alpha")}, func(r *rig) {
		r.cfg.Expose.Direct = []string{"echo", "add", "sleep"}
		r.deps.Policy = pol
	}))
	echoID, addID := idOf(t, rt, "alpha", "echo"), idOf(t, rt, "alpha", "add")
	listed := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[tool.Name] = tool
	}
	for _, name := range []string{"echo", "add"} {
		tool, ok := listed[name]
		if !ok {
			t.Fatalf("%s is not listed: %v", name, slices.Sorted(maps.Keys(listed)))
		}
		if b, _ := json.Marshal(tool.InputSchema); string(b) == string(strippedSchema) {
			t.Fatalf("%s is listed with the stripped schema", name)
		}
	}
	// Listed once: not also as a stripped entry. sleep is exposed but
	// hidden by the policy, and so listed nowhere.
	for _, id := range []string{echoID, addID, idOf(t, rt, "alpha", "sleep")} {
		if w := wireOf(t, rt, id); listed[w] != nil {
			t.Fatalf("%s is listed both by name and as %s", id, w)
		}
	}
	if listed["sleep"] != nil {
		t.Fatal("sleep is listed though the policy hides it")
	}

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "by name"}})
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), "by name") {
		t.Fatalf("echo by name: %v, %v", res, err)
	}
	// The pipeline: argument validation, then the policy.
	wantError(t, cs, "echo", map[string]any{"text": 3}, CodeArgsInvalid)
	wantError(t, cs, "add", map[string]any{"a": 1, "b": 2}, CodePolicyDenied)
	// A tool the caller may not see answers as one that does not exist.
	_, errH := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 1}})
	_, errM := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nosuch", Arguments: map[string]any{"ms": 1}})
	sameRefusal(t, "tools/call", errH, errM, "sleep", "nosuch")
	// The wire name still stands for the tool in tool_execute.
	if res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": wireOf(t, rt, echoID), "args": map[string]any{"text": "by wire"}}); res.IsError {
		t.Fatalf("tool_execute by wire name: %v", env)
	}
}

// TestProxyExposeCollisions: in proxy mode an exposed tool's name that is
// another tool's entry name, or that another exposed tool holds, fails
// the start as in gateway mode; two upstreams sharing a prompt name or a
// URI do not (the first configured keeps it, the other is withheld).
func TestProxyExposeCollisions(t *testing.T) {
	// The entry name of alpha's x, which a tool of beta then carries.
	rt, err := newDirectRuntime(t, setup(t, config.ModeProxy, []testUpstream{staticUpstream("alpha", "", []string{"x"}, nil, nil)}))
	if err != nil {
		t.Fatal(err)
	}
	wire := wireOf(t, rt, idOf(t, rt, "alpha", "x"))
	for _, tc := range []struct {
		name, want string
		expose     []string
		ups        []testUpstream
	}{
		{"entry name", "the name is the proxy entry of", []string{wire}, []testUpstream{
			staticUpstream("alpha", "", []string{"x"}, nil, nil), staticUpstream("beta", "", []string{wire}, nil, nil)}},
		{"two upstreams", "the name is taken by server", []string{"y"}, []testUpstream{
			staticUpstream("alpha", "", []string{"y"}, nil, nil), staticUpstream("beta", "", []string{"y"}, nil, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newDirectRuntime(t, setup(t, config.ModeProxy, tc.ups, func(r *rig) { r.cfg.Expose.Direct = tc.expose }))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start: %v, want %q", err, tc.want)
			}
		})
	}
	rt, err = newDirectRuntime(t, setup(t, config.ModeProxy, []testUpstream{
		staticUpstream("alpha", "", []string{"y"}, []string{"p"}, []string{"file:///same"}),
		staticUpstream("beta", "", []string{"y"}, []string{"p"}, []string{"file:///same"})}))
	if err != nil {
		t.Fatalf("shared prompt and URI: %v", err)
	}
	st := rt.state.Load()
	if len(st.exp.withheld) != 2 || len(st.exp.clashes) != 0 {
		t.Fatalf("withheld %v, clashes %v", st.exp.withheld, st.exp.clashes)
	}
	if it, _ := st.snap.Lookup(st.exp.prompts["p"]); it.Server != "alpha" {
		t.Fatalf("p is served by %s", it.Server)
	}
}
