package main

import (
	"strings"
	"testing"
)

// A query none of whose words a tool has ("remember facts about a person"
// over a fleet with a knowledge-graph memory server) still gets cards,
// through the real binary, marked low_confidence, the memory server's among
// them; a query that matches keeps its ordinary answer.
func TestE2EBrowseNeverEmpty(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	cs := stdioSession(t, "--gateway", "--catalog", "testdata/memory-fleet.json")
	res, m := callTool(t, cs, "tool_browse", map[string]any{"query": "remember facts about a person", "top_k": 5})
	cards, _ := m["cards"].([]any)
	if res.IsError || len(cards) == 0 {
		t.Fatalf("no cards: %v", m)
	}
	if low, _ := m["low_confidence"].(bool); !low {
		t.Errorf("low_confidence not set: %v", m)
	}
	memory := false
	for _, c := range cards {
		id, _ := c.(map[string]any)["id"].(string)
		memory = memory || strings.HasPrefix(id, "memory:")
	}
	if !memory {
		t.Errorf("no memory card among %v", cards)
	}
	_, m = callTool(t, cs, "tool_browse", map[string]any{"query": "add observations to the knowledge graph", "top_k": 5})
	if low, _ := m["low_confidence"].(bool); low {
		t.Errorf("a matching query marked low confidence: %v", m)
	}
	if id := browseFirst(t, cs, "add observations to the knowledge graph"); !strings.HasPrefix(id, "memory:add_observations#") {
		t.Errorf("first card %s", id)
	}
}
