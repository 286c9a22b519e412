package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EProxyPrimitives: in proxy mode, go-sdk clients at 2026-07-28 and
// at 2025-11-25 list the fleet's prompts, resources and resource templates
// and read and render them by name and URI, with the policy applied: what
// it hides (everything of beta) is neither listed nor readable, and answers
// as what does not exist. A tool matching expose.direct is listed under
// its own name with its real schema and callable by it; an entry's
// SEP-986 name still stands for its tool in tool_execute.
func TestE2EProxyPrimitives(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	must(t, os.WriteFile(policy, []byte(`policy_id: proxy-prims
rules:
  - id: alpha-only
    effect: allow
    match: {server: [alpha]}
`), 0o644))
	cfg, records := directConfig(t, "proxy", fmt.Sprintf("policy: {file: %q}\nexpose: {direct: [echo]}", policy),
		dUp{name: "alpha", extras: true}, dUp{name: "beta", extras: true})
	srv := startHTTP(t, "--config", cfg)

	for _, c := range []struct {
		version string
		so      *mcp.ClientSessionOptions
	}{{"2026-07-28", nil}, {"2025-11-25", legacySession()}} {
		t.Run(c.version, func(t *testing.T) {
			cs := directHTTPAt(t, srv, c.so, nil)
			if v := cs.InitializeResult().ProtocolVersion; v != c.version {
				t.Fatalf("negotiated %s", v)
			}
			ctx := context.Background()

			lp, err := cs.ListPrompts(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var prompts []string
			for _, p := range lp.Prompts {
				prompts = append(prompts, p.Name)
			}
			if !slices.Equal(prompts, []string{"alpha__greet"}) {
				t.Fatalf("prompts/list = %v", prompts)
			}
			lr, err := cs.ListResources(ctx, nil)
			if err != nil || len(lr.Resources) != 1 || lr.Resources[0].URI != "test://readme" {
				t.Fatalf("resources/list = %s, %v", dJSON(t, lr), err)
			}
			lt, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(lt.ResourceTemplates) != 1 {
				t.Fatalf("resources/templates/list = %s, %v", dJSON(t, lt), err)
			}
			if c.version == "2026-07-28" {
				// Discovery is filtered by the policy: the lists are the
				// caller's own, and follow the fleet.
				for what, h := range map[string]mcp.Cacheable{"prompts": lp.Cacheable, "resources": lr.Cacheable, "templates": lt.Cacheable} {
					if h.CacheScope != "private" || h.TTLMs != 0 {
						t.Errorf("%s: ttlMs %d, cacheScope %q", what, h.TTLMs, h.CacheScope)
					}
				}
			}

			gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__greet", Arguments: map[string]string{"name": "Ada"}})
			if err != nil || len(gp.Messages) != 1 || !strings.Contains(dJSON(t, gp.Messages[0]), "Say hello to Ada.") {
				t.Fatalf("prompts/get = %v, %v", gp, err)
			}
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://readme"})
			if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "readme resource") {
				t.Fatalf("resources/read = %v, %v", rr, err)
			}
			if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://items/7"}); err != nil || len(rr.Contents) == 0 {
				t.Fatalf("resources/read of a template URI = %v, %v", rr, err)
			}

			// beta's prompt answers as a name nobody lists.
			_, errH := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta__greet", Arguments: map[string]string{"name": "x"}})
			_, errM := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta__nosuch", Arguments: map[string]string{"name": "x"}})
			if errH == nil || errM == nil || strings.ReplaceAll(errH.Error(), "greet", "N") != strings.ReplaceAll(errM.Error(), "nosuch", "N") {
				t.Errorf("hidden prompt: %v; missing: %v", errH, errM)
			}

			// Tools: echo is listed by name with its schema (alpha's; beta's
			// is hidden), the others as stripped entries.
			tools := dListTools(t, cs)
			if tools["alpha__echo"] == nil || tools["beta__echo"] != nil {
				t.Fatalf("tools/list = %v", dToolNames(tools))
			}
			if s := dJSON(t, tools["alpha__echo"].InputSchema); !strings.Contains(s, `"text"`) {
				t.Fatalf("alpha__echo is listed with schema %s", s)
			}
			names := dToolNames(tools)
			if w := listedAs(names, "alpha", "echo"); w != "" {
				t.Fatalf("alpha's echo is listed twice: alpha__echo and %s", w)
			}
			if listedAs(names, "beta", "add") != "" {
				t.Fatal("beta's add is listed though the policy hides it")
			}
			res, _ := callTool(t, cs, "alpha__echo", map[string]any{"text": "by name " + c.version})
			if res.IsError || dText(res) != "by name "+c.version {
				t.Fatalf("alpha__echo: %s", dJSON(t, res))
			}
			_, errH = cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"text": "x"}})
			_, errM = cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta__nosuch", Arguments: map[string]any{"text": "x"}})
			if errH == nil || errM == nil || strings.ReplaceAll(errH.Error(), "echo", "N") != strings.ReplaceAll(errM.Error(), "nosuch", "N") {
				t.Errorf("hidden tool: %v; missing: %v", errH, errM)
			}
			add := listedAs(names, "alpha", "add")
			if add == "" {
				t.Fatalf("alpha's add is not listed: %v", names)
			}
			if res, env := execute(t, cs, add, map[string]any{"a": 2, "b": 3}); res.IsError || !strings.Contains(fmt.Sprint(env["result"]), "5") {
				t.Fatalf("tool_execute(%s) = %v", add, env)
			}
		})
	}
	// Only alpha saw calls: echo by name once per client, add by its
	// entry's name once per client.
	var tools []string
	for _, c := range dRecordedCalls(t, records["alpha"]) {
		tools = append(tools, fmt.Sprint(c["tool"]))
	}
	slices.Sort(tools)
	if !slices.Equal(tools, []string{"add", "add", "echo", "echo"}) {
		t.Errorf("alpha saw %v", tools)
	}
	if calls := dRecordedCalls(t, records["beta"]); len(calls) != 0 {
		t.Errorf("beta saw %v", calls)
	}

	// Receipts: every prompts/get and resources/read has one, and the
	// hidden prompt's keeps the truth the caller was not told.
	receiptsDir := filepath.Join(filepath.Dir(cfg), "state", "receipts")
	byMethod := map[string][]map[string]any{}
	dEventually(10*time.Second, func() bool {
		byMethod = map[string][]map[string]any{}
		files, _ := filepath.Glob(filepath.Join(receiptsDir, "receipts-*.jsonl"))
		for _, f := range files {
			for _, line := range strings.Split(dReadFile(f), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil {
					method, _ := field(m, "mcp.method").(string)
					byMethod[method] = append(byMethod[method], m)
				}
			}
		}
		return len(byMethod["prompts/get"]) >= 6 && len(byMethod["resources/read"]) >= 4
	})
	if n := len(byMethod["resources/read"]); n != 4 {
		t.Errorf("%d resources/read receipts, want 4", n)
	}
	var hidden int
	for _, r := range byMethod["prompts/get"] {
		if field(r, "mcp.server_id") == "beta" && field(r, "decision.result") == "deny" &&
			strings.Contains(fmt.Sprint(field(r, "decision.reason_codes")), "CONCEALED") {
			hidden++
		}
	}
	if len(byMethod["prompts/get"]) != 6 || hidden != 2 {
		t.Errorf("%d prompts/get receipts, %d of them beta's concealed: %v", len(byMethod["prompts/get"]), hidden, byMethod["prompts/get"])
	}
}
