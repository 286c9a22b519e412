package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// writeReceipts writes a few receipts on two days into dir.
func writeReceipts(t *testing.T, dir string) {
	t.Helper()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	w, err := receipts.NewWriter(receipts.WriterOptions{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		sub, tool string
		eff       policy.Effect
	}{
		{"alice", "github:create_issue#34afee88", policy.EffectAllow},
		{"bob", "github:delete_repo#22222222", policy.EffectDeny},
		{"alice", "slack:send#283a5dcf", policy.EffectRequireApproval},
		{"alice", "github:list_repos#da62b2ed", policy.EffectAllow},
	} {
		r := receipts.New("tools/call:tool_execute", now.Add(time.Duration(i)*12*time.Hour))
		r.Principal = receipts.PrincipalOf(identity.Principal{Sub: c.sub, ActorType: "agent"})
		r.MCP.ToolID = c.tool
		r.Decision = receipts.DecisionOf(policy.Decision{Effect: c.eff, PolicyID: "p", ReasonCodes: []string{"X"}})
		r.Outcome.Status = receipts.StatusSuccess
		w.Emit(r)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReceiptsQueryCmd(t *testing.T) {
	dir := t.TempDir()
	writeReceipts(t, dir)
	code, out, errs := runCLI(t, "receipts", "query", "--dir", dir, "--sub", "alice", "--tool", "github:*")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "github:create_issue#34afee88") || !strings.Contains(lines[0], "sub=alice") ||
		!strings.HasPrefix(lines[0], "2026-03-01T09:00:00.000Z  allow") {
		t.Fatalf("output:\n%s", out)
	}
	code, out, _ = runCLI(t, "receipts", "query", "--dir", dir, "--result", "deny", "--json")
	var r receipts.Receipt
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Principal.Sub != "bob" {
		t.Fatalf("--json: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "receipts", "query", "--dir", dir, "--from", "2026-03-02", "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "slack:send") {
		t.Fatalf("--from --limit: %d %s", code, out)
	}
	for _, bad := range [][]string{{"--result", "maybe"}, {"--from", "yesterday"}, {"--limit", "-1"}, {"--tool", `x\`}} {
		if code, _, _ := runCLI(t, append([]string{"receipts", "query", "--dir", dir}, bad...)...); code == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
	// Without --dir, state_dir of the configuration.
	cfgDir := t.TempDir()
	state := filepath.Join(cfgDir, "state")
	writeReceipts(t, filepath.Join(state, receipts.DirName))
	cfg := filepath.Join(cfgDir, "quiver.yaml")
	if err := os.WriteFile(cfg, []byte("state_dir: state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "receipts", "query", "--config", cfg, "--sub", "bob")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("--config: %d %q %s", code, out, errs)
	}
}

func TestReceiptsTailCmd(t *testing.T) {
	dir := t.TempDir()
	writeReceipts(t, dir)
	code, out, errs := runCLI(t, "receipts", "tail", "--dir", dir, "-n", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "slack:send") || !strings.Contains(lines[1], "github:list_repos") {
		t.Fatalf("output:\n%s", out)
	}
}
