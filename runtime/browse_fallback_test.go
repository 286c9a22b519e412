package runtime

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
)

// A query that matches no visible tool's words still gets cards, marked
// low_confidence, and only cards of tools the caller may see: the router's
// fallback runs through the same visibility check as its lexical search.
func TestBrowseFallbackVisible(t *testing.T) {
	p, err := policy.Parse("p.yaml", []byte(`policy_id: local
rules:
  - id: alice-math
    effect: allow
    match: {principal: {sub: alice, issuer: local}, server: [math]}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t), func(r *rig) { r.cfg.Auth.Local.Sub = "alice"; r.deps.Policy = p }))
	for _, tc := range []struct {
		query string
		low   bool
	}{
		{"open an issue in a github repository", true}, // lexical hits are all hidden
		{"weather forecast for Oslo", true},
		{"remember facts about a person", true},
		{"zzzz", true},
		{"add two numbers", false},
	} {
		res, m := call(t, cs, ToolBrowse, map[string]any{"query": tc.query, "top_k": 5})
		cards, _ := m["cards"].([]any)
		if res.IsError || len(cards) == 0 {
			t.Fatalf("%q: no cards: %v", tc.query, m)
		}
		for _, c := range cards {
			if id, _ := c.(map[string]any)["id"].(string); !strings.HasPrefix(id, "math:") {
				t.Errorf("%q: card %s of a hidden server", tc.query, id)
			}
		}
		if low, _ := m["low_confidence"].(bool); low != tc.low {
			t.Errorf("%q: low_confidence %v, want %v", tc.query, low, tc.low)
		}
		if txt, ok := res.Content[0].(*mcp.TextContent); !ok || strings.Contains(txt.Text, "low confidence") != low(m) {
			t.Errorf("%q: text does not say what low_confidence says: %v", tc.query, res.Content[0])
		}
	}
}

func low(m map[string]any) bool { b, _ := m["low_confidence"].(bool); return b }
