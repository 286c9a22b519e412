package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestAdminCLIKillSwitch drives the kill switch with `quiver admin` and
// measures the time from the admin call's answer to the first denied call
// (logged; the figure is documented in the README, never asserted).
func TestAdminCLIKillSwitch(t *testing.T) {
	e := startSafety(t, "")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	add := listedID(t, alice, listNames(t, alice), "alpha", "add")
	if res, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2}); res.IsError {
		t.Fatalf("before the kill: %v", m)
	}
	admin := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(quiverBin, append([]string{"admin", "--url", e.srv.base, "--token-env", "QUIVER_E2E_ADMIN_TOKEN"}, args...)...)
		cmd.Env = append(os.Environ(), "QUIVER_E2E_ADMIN_TOKEN="+safetyAdminToken)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("quiver admin %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := admin("kill", "add", "--rule", `{"server":["alpha"],"reason":"cli"}`)
	answered := time.Now()
	_, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2})
	t.Logf("admin kill answered -> next call denied: %v", time.Since(answered))
	if errCode(m) != "POLICY_DENIED" || !hasString(field(m, "details.reason_codes"), "KILL_SWITCH") {
		t.Fatalf("after quiver admin kill add: %v (%s)", m, out)
	}
	if !strings.Contains(admin("incident", "show"), "kill") {
		t.Fatal("incident show does not list the kill rule")
	}
	// Without the token the CLI refuses at once, exit 2.
	cmd := exec.Command(quiverBin, "admin", "--url", e.srv.base, "--token-env", "QUIVER_E2E_NO_SUCH_VAR", "incident", "show")
	if err := cmd.Run(); err == nil || err.(*exec.ExitError).ExitCode() != 2 {
		t.Fatalf("missing token: %v", err)
	}
	e.srv.stop(t, syscall.SIGTERM)
}
