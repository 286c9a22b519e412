package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// Over stdio (and in-memory sessions) the caller is the local principal:
// the policy filters tools/list and refuses calls for it, and every call
// leaves one receipt under StateDir/receipts.
func TestLocalPrincipalPolicyAndReceipts(t *testing.T) {
	p, err := policy.Parse("p.yaml", []byte(`policy_id: local
rules:
  - id: alice-math
    effect: allow
    match: {principal: {sub: alice, issuer: local}, server: [math]}
`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rt, cs := startRuntime(t, setup(t, config.ModeProxy, staticFleet(t), func(r *rig) { r.cfg.Auth.Local.Sub = "alice"; r.deps.Policy = p; r.cfg.StateDir = dir }))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var mathID, githubID string
	for _, tool := range res.Tools {
		switch {
		case strings.HasPrefix(tool.Name, "github."):
			t.Fatalf("a denied tool is listed: %s", tool.Name)
		case strings.HasPrefix(tool.Name, "math.add."):
			mathID = tool.Name
		}
	}
	if mathID == "" {
		t.Fatalf("math.add.* not listed: %v", res.Tools)
	}
	for _, it := range rt.Snapshot().Items("tool") {
		if it.Server == "github" {
			githubID = it.ID
		}
	}
	out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolExecute, Arguments: map[string]any{"tool_id": githubID, "args": map[string]any{"repo": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var e Error
	b, _ := json.Marshal(out.StructuredContent)
	// A tool alice may not see answers like a missing one; the receipt
	// keeps the policy's decision.
	if json.Unmarshal(b, &e); e.Code != CodeHydrateFailed {
		t.Fatalf("got %s", b)
	}
	if err := rt.rec.out.Flush(); err != nil {
		t.Fatal(err)
	}
	var found bool
	err = receipts.Reader{Dir: filepath.Join(dir, receipts.DirName)}.Query(context.Background(), receipts.Filter{Result: "deny"}, func(r receipts.Receipt) error {
		if r.MCP.ToolID == githubID && r.Principal.Sub == "alice" && r.Decision.PolicyID == "local" && slices.Contains(r.Decision.ReasonCodes, ReasonConcealed) {
			found = true
		}
		return nil
	})
	if err != nil || !found {
		entries, _ := os.ReadDir(filepath.Join(dir, receipts.DirName))
		t.Fatalf("no deny receipt (%v, %v)", err, entries)
	}
}
