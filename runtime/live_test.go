package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/units"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/toolid"
)

// upstreamBin is the go-sdk test server of testdata/upstream, built once.
var upstreamBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "quiver-runtime-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	upstreamBin = filepath.Join(dir, "upstream")
	build := exec.Command("go", "build", "-o", upstreamBin, "../testdata/upstream")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test upstream: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

func liveUpstream(name string, args ...string) testUpstream {
	u := newUpstream(name)
	u.Command = append([]string{upstreamBin, "-name", name}, args...)
	u.Sandbox = &config.Sandbox{Off: "test fixture"} // so that prod starts it
	return testUpstream{cfg: u}
}

func idOf(t *testing.T, rt *Runtime, server, name string) string {
	t.Helper()
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		if it.Server == server && it.UpstreamName == name {
			return it.ID
		}
	}
	t.Fatalf("no tool %s/%s in the catalog", server, name)
	return ""
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLiveExecute(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha")}))
	add := idOf(t, rt, "alpha", "add")
	if !strings.HasPrefix(add, "alpha:add#") {
		t.Fatalf("id %s", add)
	}
	_, env := call(t, cs, ToolExecute, map[string]any{"tool_id": add, "args": map[string]any{"a": 2, "b": 3}})
	sc := env["result"].(map[string]any)["structuredContent"].(map[string]any)
	if sc["sum"] != 5.0 {
		t.Fatalf("2+3 = %v", env)
	}
	// An upstream tool's own error is a tool error with an envelope, not a
	// gateway error.
	res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "fail"), "args": map[string]any{"message": "nope"}})
	if !res.IsError || env["status"] != "error" || env["error"] != nil {
		t.Fatalf("fail = %v", env)
	}
}

func TestLiveTimeoutAndCancel(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha")}, func(r *rig) { r.cfg.Timing.CallTimeout = 300 * time.Millisecond }))
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "hang")}, CodeUpstreamTimeout)
	if m["retryable"] != true {
		t.Fatalf("timeout not retryable: %v", m)
	}
	// The upstream survives a timed-out call.
	_, env := call(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "echo"), "args": map[string]any{"text": "hi"}})
	if env["status"] != "ok" {
		t.Fatalf("after timeout: %v", env)
	}
}

func TestLiveCrashAndRecover(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha")}))
	crash := idOf(t, rt, "alpha", "crash")
	echo := idOf(t, rt, "alpha", "echo")
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": crash}, CodeUpstreamUnavailable)
	if m["retryable"] != true {
		t.Fatalf("unavailable not retryable: %v", m)
	}
	// The supervisor restarts the process; calls work again.
	waitFor(t, "recovery", func() bool {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolExecute, Arguments: map[string]any{"tool_id": echo, "args": map[string]any{"text": "back"}}})
		return err == nil && !res.IsError
	})
}

func TestLiveListChanged(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeProxy, []testUpstream{liveUpstream("alpha")}))
	before := len(toolNames(t, cs))
	_, env := call(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "add_tool"), "args": map[string]any{"name": "fresh"}})
	if env["status"] != "ok" {
		t.Fatalf("add_tool = %v", env)
	}
	waitFor(t, "the new tool in the catalog", func() bool {
		for _, it := range rt.Snapshot().Items(toolid.KindTool) {
			if it.UpstreamName == "fresh" {
				return true
			}
		}
		return false
	})
	waitFor(t, "the new tool in tools/list", func() bool { return len(toolNames(t, cs)) == before+1 })
	fresh := idOf(t, rt, "alpha", "fresh")

	_, env = call(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "remove_tool"), "args": map[string]any{"name": "fresh"}})
	if env["status"] != "ok" {
		t.Fatalf("remove_tool = %v", env)
	}
	waitFor(t, "the tool to leave the catalog", func() bool {
		_, ok := rt.Snapshot().Lookup(fresh)
		return !ok
	})
	// A tool_id that disappeared fails closed.
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": fresh, "args": map[string]any{"text": "x"}}, CodeHydrateFailed)
	waitFor(t, "tools/list to shrink", func() bool { return len(toolNames(t, cs)) == before })
}

func TestSlowUpstreamDoesNotBlock(t *testing.T) {
	// A command that never speaks MCP: the fleet starts without it.
	mute := newUpstream("mute")
	mute.Command, mute.ConnectTimeout = []string{"sleep", "30"}, units.Duration(200*time.Millisecond)
	slow := testUpstream{cfg: mute}
	start := time.Now()
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha"), slow}, func(r *rig) { r.cfg.Timing.ReadyTimeout = time.Second }))
	if time.Since(start) > 5*time.Second {
		t.Fatalf("start took %v", time.Since(start))
	}
	_, env := call(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "echo"), "args": map[string]any{"text": "hi"}})
	if env["status"] != "ok" {
		t.Fatalf("echo = %v", env)
	}
}

func TestResourcesAndPrompts(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha")}))
	names := strings.Join(toolNames(t, cs), ",")
	if names != "prompt_browse,prompt_get,resource_browse,resource_read,tool_browse,tool_execute,tool_hydrate,tool_view" {
		t.Fatalf("tools/list = %s", names)
	}
	_, m := call(t, cs, ResourceBrowse, map[string]any{"query": "readme of the test server"})
	cards := m["cards"].([]any)
	if len(cards) != 1 {
		t.Fatalf("resource cards = %v", m)
	}
	card := cards[0].(map[string]any)
	if card["kind"] != "resource" || !strings.HasPrefix(card["id"].(string), "resource::alpha:readme#") {
		t.Fatalf("resource card = %v", card)
	}
	_, env := call(t, cs, ResourceRead, map[string]any{"resource_id": card["id"]})
	b, _ := json.Marshal(env["result"])
	if env["status"] != "ok" || !strings.Contains(string(b), "test://readme") {
		t.Fatalf("resource_read = %v", env)
	}
	// Tool and resource cards never mix.
	_, m = call(t, cs, ToolBrowse, map[string]any{"query": "readme of the test server"})
	for _, c := range m["cards"].([]any) {
		if c.(map[string]any)["kind"] != "tool" {
			t.Fatalf("tool_browse returned %v", c)
		}
	}
	_, m = call(t, cs, PromptBrowse, map[string]any{"path": "/"})
	if len(m["cards"].([]any)) != 1 {
		t.Fatalf("prompt root = %v", m)
	}
	var greet string
	for _, it := range rt.Snapshot().Items(toolid.KindPrompt) {
		greet = it.ID
	}
	_, env = call(t, cs, PromptGet, map[string]any{"prompt_id": greet, "args": map[string]any{"name": "Ada"}})
	b, _ = json.Marshal(env["result"])
	if env["status"] != "ok" || !strings.Contains(string(b), "Ada") {
		t.Fatalf("prompt_get = %v", env)
	}
	wantError(t, cs, PromptGet, map[string]any{"prompt_id": greet, "args": map[string]any{}}, CodeArgsInvalid)
	wantError(t, cs, PromptGet, map[string]any{"prompt_id": greet, "args": map[string]any{"name": "a", "other": "b"}}, CodeArgsInvalid)
	wantError(t, cs, PromptGet, map[string]any{"prompt_id": greet, "args": map[string]any{"name": 3}}, CodeArgsInvalid)
	wantError(t, cs, PromptGet, map[string]any{"prompt_id": "prompt::alpha:nope#00000000"}, CodePromptNotFound)
	wantError(t, cs, ResourceRead, map[string]any{"resource_id": greet}, CodeResourceNotFound)
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := goruntime.NumGoroutine()
	rg := setup(t, config.ModeProxy, append(staticFleet(t), liveUpstream("alpha")))
	rt, err := New(rg.cfg, rg.deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := startAndWait(ctx, rt); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := rt.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolExecute, Arguments: map[string]any{"tool_id": idOf(t, rt, "alpha", "echo"), "args": map[string]any{"text": "x"}}}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	ss.Close()
	cancel()
	rt.Close()
	waitFor(t, "goroutines to end", func() bool { return goruntime.NumGoroutine() <= before+2 })
}

func TestFirewallAndView(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha")}, func(r *rig) { r.cfg.StateDir = t.TempDir() }))
	res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "big_log"), "args": map[string]any{"lines": 60000}})
	if res.IsError {
		t.Fatalf("big_log: %v", env)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if n := rt.cards.Counter().Count(text); n >= 1000 {
		t.Fatalf("envelope costs %d tokens", n)
	}
	fw := env["firewall"].(map[string]any)
	if fw["triggered"] != true || fw["original_bytes"].(float64) < 4<<20 {
		t.Fatalf("firewall stats = %v", fw)
	}
	arts := env["artifacts"].([]any)
	if len(arts) == 0 || env["result"] != nil {
		t.Fatalf("artifacts = %v, result = %v", arts, env["result"])
	}
	handle := arts[0].(map[string]any)["handle"].(string)
	view := func(sel map[string]any) map[string]any {
		t.Helper()
		res, v := call(t, cs, ToolView, map[string]any{"handle": handle, "selector": sel})
		if res.IsError {
			t.Fatalf("view %v: %v", sel, v)
		}
		return v
	}
	v := view(map[string]any{"type": "lines", "start": 30000, "end": 30004})
	if lines := strings.Split(strings.TrimSpace(v["text"].(string)), "\n"); len(lines) != 5 {
		t.Fatalf("lines 30000-30004 = %q", v["text"])
	}
	v = view(map[string]any{"type": "grep", "pattern": "ERROR", "max_matches": 5})
	if !strings.Contains(v["text"].(string), "ERROR") {
		t.Fatalf("grep = %v", v)
	}
	v = view(map[string]any{"type": "lines", "start": -1})
	if last := strings.TrimSpace(v["text"].(string)); last == "" || strings.Contains(last, "\n") {
		t.Fatalf("last line = %q", last)
	}
	wantError(t, cs, ToolView, map[string]any{"handle": handle, "selector": map[string]any{"type": "grep", "pattern": "("}}, CodeViewFailed)
	wantError(t, cs, ToolView, map[string]any{"handle": handle, "selector": map[string]any{"type": "teleport"}}, CodeViewFailed)
	wantError(t, cs, ToolView, map[string]any{"handle": handle, "selector": map[string]any{"type": "json_pointer", "pointer": "/a"}}, CodeViewFailed)

	// Another principal (another session over HTTP) cannot see it: the
	// same answer as a handle that never existed.
	other := wantError(t, cs2(t, rt), ToolView, map[string]any{"handle": handle, "selector": map[string]any{"type": "head"}}, CodeViewFailed)
	missing := wantError(t, cs, ToolView, map[string]any{"handle": "art_aaaaaaaaaaaaaaaaaaaaaaaaaa", "selector": map[string]any{"type": "head"}}, CodeViewFailed)
	// The answer is the same for a foreign handle and a missing one; the
	// message lists the causes, and to an anonymous session it adds the
	// session rule, without saying which cause applies.
	missing2 := wantError(t, cs2(t, rt), ToolView, map[string]any{"handle": "art_aaaaaaaaaaaaaaaaaaaaaaaaaa", "selector": map[string]any{"type": "head"}}, CodeViewFailed)
	if strings.Replace(other["message"].(string), handle, "H", 1) != strings.Replace(missing2["message"].(string), "art_aaaaaaaaaaaaaaaaaaaaaaaaaa", "H", 1) {
		t.Fatalf("foreign and missing handles differ: %v vs %v", other, missing2)
	}
	for _, m := range []map[string]any{other, missing} {
		msg := m["message"].(string)
		if !strings.Contains(msg, "another principal's") || !strings.Contains(msg, "expired") || strings.Contains(msg, "…") {
			t.Fatalf("message %q does not list the causes in full", msg)
		}
	}
	if !strings.Contains(other["message"].(string), "each session is its own principal") || strings.Contains(missing["message"].(string), "session") {
		t.Fatalf("the session rule is for anonymous sessions only: %q / %q", other["message"], missing["message"])
	}

	// JSON: the summary shows the shape and json_pointer reaches a leaf.
	res, env = call(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "big_json"), "args": map[string]any{"items": 3000}})
	if res.IsError || !strings.Contains(env["summary"].(string), "items") {
		t.Fatalf("big_json summary = %v", env["summary"])
	}
	handle = env["artifacts"].([]any)[0].(map[string]any)["handle"].(string)
	v = view(map[string]any{"type": "json_pointer", "pointer": "/items/2999/id"})
	if strings.TrimSpace(v["text"].(string)) != "3000" {
		t.Fatalf("/items/2999/id = %q", v["text"])
	}
}

// cs2 connects a second client whose session has an id of its own, as an
// HTTP session would: a different principal.
func cs2(t *testing.T, rt *Runtime) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(rt.Handler("/mcp"))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "other", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
