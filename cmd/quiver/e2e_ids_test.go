package main

import (
	"strings"
	"testing"
)

// TestE2EShortToolNames: through the real binary, tool_hydrate and
// tool_execute take "server:name" for alpha's add and answer with its full
// tool_id; a typo is HYDRATE_FAILED with the id it meant; proxy mode takes
// its listing's "server.name" too.
func TestE2EShortToolNames(t *testing.T) {
	for _, mode := range []string{"gateway", "proxy"} {
		t.Run(mode, func(t *testing.T) {
			cfg, _ := fleetConfig(t, mode)
			cs := stdioSession(t, "--config", cfg)
			refs := []string{"alpha:add"}
			if mode == "proxy" {
				refs = append(refs, "alpha.add")
			}
			var full string
			for _, ref := range refs {
				_, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": ref})
				id, _ := h["id"].(string)
				if !strings.HasPrefix(id, "alpha:add#") {
					t.Fatalf("hydrate(%q) = %v", ref, h)
				}
				full = id
				res, env := execute(t, cs, ref, map[string]any{"a": 2, "b": 3})
				if res.IsError {
					t.Fatalf("execute(%q): %v", ref, env)
				}
				if sc := env["result"].(map[string]any)["structuredContent"].(map[string]any); sc["sum"] != 5.0 {
					t.Fatalf("execute(%q): 2+3 = %v", ref, sc)
				}
				if p, _ := env["provenance"].(map[string]any); p["tool_id"] != full {
					t.Fatalf("execute(%q): provenance %v, want tool_id %s", ref, p, full)
				}
			}
			for _, typo := range []string{"alpha:ad", "alpha:add#00000000", "alpa:add"} {
				res, m := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": typo})
				if !res.IsError || m["error"] != "HYDRATE_FAILED" {
					t.Fatalf("hydrate(%q): %v", typo, m)
				}
				d, _ := m["details"].(map[string]any)["did_you_mean"].([]any)
				if len(d) == 0 || len(d) > 3 || d[0] != full {
					t.Fatalf("hydrate(%q): did_you_mean %v, want %s first", typo, d, full)
				}
			}
		})
	}
}
