package runtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
)

// checkOutputSchemaResult asserts what the official TypeScript client's
// callTool checks of a tool with an outputSchema (packages/client
// client.ts): a result that is not isError carries structured content.
func checkOutputSchemaResult(t *testing.T, what string, res *mcp.CallToolResult) {
	t.Helper()
	if !res.IsError && res.StructuredContent == nil {
		t.Fatalf("%s: a success without structured content: the TypeScript client throws", what)
	}
	if res.IsError && res.StructuredContent != nil {
		// SDK 1.x validates structured content against the schema even
		// on an error result.
		t.Fatalf("%s: an error result with structured content %v", what, res.StructuredContent)
	}
}

// TestDirectOutputSchemaResults: in direct mode, a result the firewall
// keeps out of the context of a tool that declares an outputSchema stays a
// valid result for the schema: the upstream's structured content when it
// fits the budget (the envelope beside it as text), otherwise an isError
// result that carries the envelope; small results pass as they are.
func TestDirectOutputSchemaResults(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha")}, func(r *rig) { r.cfg.StateDir = t.TempDir() }))
	const tool = "report" // the test upstreams have no tool_prefix
	envelopeOf := func(res *mcp.CallToolResult) map[string]any {
		t.Helper()
		var env map[string]any
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &env); err != nil {
			t.Fatalf("content[0] is no envelope: %v", err)
		}
		return env
	}
	callReport := func(args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// Small: verbatim, the upstream's own result.
	res := callReport(map[string]any{"lines": 3}, nil)
	checkOutputSchemaResult(t, "small", res)
	if res.IsError || !strings.Contains(compactJSON(res.StructuredContent), `"lines":3`) || strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"firewall"`) {
		t.Fatalf("small result = %+v", res)
	}

	// Large text, small structured content: the structured content as the
	// upstream sent it, the envelope as text.
	res = callReport(map[string]any{"lines": 300}, nil)
	checkOutputSchemaResult(t, "large text", res)
	if res.IsError || compactJSON(res.StructuredContent) != `{"lines":300}` {
		t.Fatalf("large text: isError=%v structured=%s", res.IsError, compactJSON(res.StructuredContent))
	}
	env := envelopeOf(res)
	if fw := env["firewall"].(map[string]any); fw["triggered"] != true || len(env["artifacts"].([]any)) == 0 {
		t.Fatalf("large text envelope = %v", env)
	}
	if n := rt.cards.Counter().Count(res.Content[0].(*mcp.TextContent).Text + compactJSON(res.StructuredContent)); n > 1500 {
		t.Fatalf("the result costs %d tokens", n)
	}

	// Large structured content too: nothing valid for the schema fits, so
	// the result is an error that carries the envelope and says why.
	res = callReport(map[string]any{"lines": 300, "full": true}, nil)
	checkOutputSchemaResult(t, "large structured", res)
	if !res.IsError || len(res.Content) != 2 || !strings.Contains(res.Content[1].(*mcp.TextContent).Text, "outputSchema") {
		t.Fatalf("large structured content = %+v", res)
	}
	env = envelopeOf(res)
	arts := env["artifacts"].([]any)
	if env["status"] != "ok" || len(arts) == 0 {
		t.Fatalf("large structured envelope = %v", env)
	}
	// The artifacts hold the result for tool_view.
	handle := arts[0].(map[string]any)["handle"].(string)
	if vr, m := call(t, cs, ToolView, map[string]any{"handle": handle, "selector": map[string]any{"type": "head", "chars": 200}}); vr.IsError {
		t.Fatalf("tool_view = %v", m)
	}

	// An idempotent replay answers the same.
	key := mcp.Meta{MetaIdempotencyKey: "report-1"}
	first := callReport(map[string]any{"lines": 250}, key)
	again := callReport(map[string]any{"lines": 250}, key)
	checkOutputSchemaResult(t, "replay", again)
	if compactJSON(first.StructuredContent) != `{"lines":250}` || compactJSON(again.StructuredContent) != compactJSON(first.StructuredContent) {
		t.Fatalf("replay structured = %s, first %s", compactJSON(again.StructuredContent), compactJSON(first.StructuredContent))
	}

	// firewall.off_for passes a large result as it is.
	_, cs2 := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha")}, func(r *rig) { r.cfg.Firewall.OffFor = []string{"report"} }))
	res, err := cs2.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"lines": 300, "full": true}})
	if err != nil {
		t.Fatal(err)
	}
	checkOutputSchemaResult(t, "off_for", res)
	if res.IsError || len(compactJSON(res.StructuredContent)) < 10_000 {
		t.Fatalf("off_for: isError=%v, %d bytes of structured content", res.IsError, len(compactJSON(res.StructuredContent)))
	}
}
