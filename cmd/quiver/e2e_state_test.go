package main

// Issue 14: state shared by many quiver processes on one machine (the
// embedded backend) and by replicas on one Redis.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// adminAt sends one admin API request with the admin token to the quiver
// at base, and fails the test on an error status.
func adminAt(t *testing.T, base, method, path string, body any) map[string]any {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(b))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+safetyAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, m)
	}
	return m
}

// TestE2EProcessesShareEmbeddedState: four stdio gateways (four editor
// windows) and one HTTP gateway with the admin API, all on the README's
// default state directory, start and serve at once; a write made with an
// idempotency key through one replays in the others without a second
// dispatch; a kill rule set through the admin API of one holds at the
// next call of every other.
func TestE2EProcessesShareEmbeddedState(t *testing.T) {
	f := newGuardFleet(t, "")
	// The default state directory, under a temp XDG_STATE_HOME: the
	// configuration names none.
	xdg := t.TempDir()
	t.Setenv("XDG_STATE_HOME", xdg)
	t.Setenv("QUIVER_E2E_ADMIN_TOKEN", safetyAdminToken)
	cfg, err := os.ReadFile(f.cfg)
	must(t, err)
	var lines []string
	for _, l := range strings.Split(string(cfg), "\n") {
		if !strings.HasPrefix(l, "state_dir:") {
			lines = append(lines, l)
		}
	}
	noDir := strings.Join(lines, "\n")
	must(t, os.WriteFile(f.cfg, []byte(noDir), 0o644))
	adminCfg := filepath.Join(filepath.Dir(f.cfg), "admin.yaml")
	must(t, os.WriteFile(adminCfg, []byte(noDir+"\nadmin: {token_env: QUIVER_E2E_ADMIN_TOKEN}\n"), 0o644))

	// Start the four at once: one of them wins the store, the others
	// reach it through it.
	sessions := make([]*mcp.ClientSession, 4)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessions[i] = stdioSession(t, "--config", f.cfg)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if _, err := os.Stat(filepath.Join(xdg, "quiver", "state")); err != nil {
		t.Fatalf("the shared store is not under the default state directory: %v", err)
	}
	ids := toolIDs(t, sessions[0], "alpha")
	echo, add := ids["alpha/echo"], ids["alpha/add"]
	for i, cs := range sessions {
		if res, m := execute(t, cs, add, map[string]any{"a": i, "b": 1}); res.IsError {
			t.Fatalf("process %d does not serve: %v", i, m)
		}
	}

	// One write, four processes, one dispatch.
	args := map[string]any{"tool_id": echo, "args": map[string]any{"text": "pay 10"}, "idempotency_key": "payment-7"}
	var effect any
	for i, cs := range sessions {
		res, env := callTool(t, cs, "tool_execute", args)
		if res.IsError {
			t.Fatalf("process %d: %v", i, env)
		}
		id := env["effect"].(map[string]any)["effect_id"]
		if i == 0 {
			effect = id
			continue
		}
		if id != effect || env["provenance"].(map[string]any)["idempotent_replay"] != true {
			t.Fatalf("process %d did not replay %v: %v", i, effect, env)
		}
	}
	if n := f.calls(t)["alpha/echo"]; n != 1 {
		t.Fatalf("the write was dispatched %d times across 4 processes", n)
	}

	// A kill rule set through a fifth process's admin API holds in the
	// stdio ones at their next call.
	admin := startHTTP(t, "--config", adminCfg)
	adminAt(t, admin.base, "POST", "/admin/v1/kill", map[string]any{"server": []string{"alpha"}, "reason": "e2e"})
	for i, cs := range sessions {
		_, m := execute(t, cs, add, map[string]any{"a": 1, "b": 2})
		if errCode(m) != "POLICY_DENIED" || !hasString(field(m, "details.reason_codes"), "KILL_SWITCH") {
			t.Fatalf("process %d after the kill: %v", i, m)
		}
	}
	before := f.calls(t)["alpha/add"]
	if before != len(sessions) {
		t.Fatalf("alpha/add dispatched %d times, want %d (the killed calls must not reach it)", before, len(sessions))
	}

	// The owner goes away; the others take over and the kill rule stays.
	sessions[0].Close()
	for i, cs := range sessions[1:] {
		_, m := execute(t, cs, add, map[string]any{"a": 1, "b": 2})
		if !hasString(field(m, "details.reason_codes"), "KILL_SWITCH") {
			t.Fatalf("process %d after the first one exited: %v", i+1, m)
		}
	}
}
