package runtime

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// httpUpstream starts the test upstream over streamable HTTP with args
// and returns its URL.
func httpUpstream(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(upstreamBin, append([]string{"-transport", "http", "-addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the test upstream did not print its URL: %v", err)
	}
	return strings.TrimSpace(line)
}

// RATE_LIMITED is both quiver's own limiter refusing a call and an
// upstream's HTTP 429 to a call the gateway allowed: the first is a deny
// receipt, the second an allow receipt whose outcome is the error.
func TestRateLimitedReceipts(t *testing.T) {
	url := httpUpstream(t, "-name", "alpha", "-reject", "add=429")
	dir := t.TempDir()
	alpha := newUpstream("alpha")
	alpha.URL = url
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{{cfg: alpha}}, func(r *rig) {
		r.cfg.StateDir = dir
		r.cfg.RateLimits = map[string]config.RateLimit{"tool:alpha:echo*": {MaxCallsPerSession: 1}}
	}))
	add, echo := idOf(t, rt, "alpha", "add"), idOf(t, rt, "alpha", "echo")

	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}}, CodeRateLimited)
	if m["retryable"] != true {
		t.Fatalf("upstream 429: %v", m)
	}
	if res, env := runExec(t, cs, map[string]any{"tool_id": echo, "args": map[string]any{"text": "x"}}); res.IsError {
		t.Fatalf("echo refused: %v", env)
	}
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": echo, "args": map[string]any{"text": "x"}}, CodeRateLimited)

	if err := rt.rec.out.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []receipts.Receipt
	err := receipts.Reader{Dir: filepath.Join(dir, receipts.DirName)}.Query(context.Background(), receipts.Filter{Method: "tools/call:" + ToolExecute}, func(r receipts.Receipt) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d receipts, want 3: %+v", len(got), got)
	}
	up, own := got[0], got[2]
	if up.MCP.ToolID != add || up.Decision.Result != "allow" || up.Outcome.Status != receipts.StatusError || up.Outcome.ErrorCode != CodeRateLimited {
		t.Errorf("upstream 429: decision %+v, outcome %+v; want allow, error %s", up.Decision, up.Outcome, CodeRateLimited)
	}
	if own.MCP.ToolID != echo || own.Decision.Result != "deny" || len(own.Decision.ReasonCodes) == 0 || own.Decision.ReasonCodes[0] != CodeRateLimited ||
		own.Outcome.Status != receipts.StatusError || own.Outcome.ErrorCode != CodeRateLimited {
		t.Errorf("quiver's limiter: decision %+v, outcome %+v; want deny %s", own.Decision, own.Outcome, CodeRateLimited)
	}
}
