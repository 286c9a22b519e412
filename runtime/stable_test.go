package runtime

import (
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"
)

// TestCacheStableBrowse: with cache_stable on, a session's second browse
// puts the cards it has seen first (id asc, frozen), then the breakpoint
// card, then new cards (spec 003 §5); another session starts fresh.
func TestCacheStableBrowse(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t), func(r *rig) { r.cfg.Browse.CacheStable = true }))
	ids := func(m map[string]any) []string {
		var out []string
		for _, c := range m["cards"].([]any) {
			out = append(out, c.(map[string]any)["id"].(string))
		}
		return out
	}
	_, first := call(t, cs, ToolBrowse, map[string]any{"query": "add two numbers", "top_k": 2})
	a := ids(first)
	for _, id := range a {
		if id == "__cache_breakpoint__" {
			t.Fatalf("first browse has a breakpoint: %v", a)
		}
	}
	_, second := call(t, cs, ToolBrowse, map[string]any{"query": "multiply or add two numbers; create github issue", "top_k": 4})
	b := ids(second)
	seen := map[string]bool{}
	for _, id := range a {
		seen[id] = true
	}
	// Seen ids that the second query also returned come first, then the
	// breakpoint, then new ones.
	brk := -1
	for i, id := range b {
		if id == "__cache_breakpoint__" {
			brk = i
		}
	}
	if brk <= 0 || brk == len(b)-1 {
		t.Fatalf("second browse %v (after %v) has no breakpoint between seen and new cards", b, a)
	}
	for i, id := range b {
		switch {
		case id == "__cache_breakpoint__":
		case brk >= 0 && i < brk && !seen[id]:
			t.Fatalf("new card %s before the breakpoint: %v", id, b)
		case i > brk && seen[id]:
			t.Fatalf("seen card %s after the breakpoint: %v", id, b)
		}
	}
	// A repeat of the first browse is all seen: the same bytes, no marker.
	_, again := call(t, cs, ToolBrowse, map[string]any{"query": "add two numbers", "top_k": 2})
	for _, id := range ids(again) {
		if id == "__cache_breakpoint__" || !seen[id] && !contains(b, id) {
			t.Fatalf("repeat browse = %v", ids(again))
		}
	}
	// Another session has its own seen-set.
	other := connect(t, t.Context(), rt)
	_, fresh := call(t, other, ToolBrowse, map[string]any{"query": "github issues", "top_k": 3})
	for _, id := range ids(fresh) {
		if id == "__cache_breakpoint__" {
			t.Fatalf("a new session inherited another's seen-set: %v", ids(fresh))
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
