package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/internal/redistest"
)

// replica is one quiver of a fleet sharing Redis.
type replica struct {
	name string
	srv  *httpServer
}

// as connects an MCP client presenting token to the replica.
func (r replica) as(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	return (&safetyEnv{srv: r.srv}).as(t, token)
}

func (r replica) admin(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	return adminAt(t, r.srv.base, method, path, body)
}

// TestE2EReplicasShareRedis: three HTTP replicas on one real Redis, a
// client alternating between them. Artifacts, idempotency records, kill
// rules, rate limits and approvals made through one hold in all; a replica
// killed with SIGKILL loses nothing; a Redis that goes away makes calls
// fail closed (STATE_UNAVAILABLE, nothing dispatched) until it is back.
func TestE2EReplicasShareRedis(t *testing.T) {
	rs := redistest.Start(t, redistest.WithPersistence())
	t.Setenv("QUIVER_E2E_JWT_SECRET", safetySecret)
	t.Setenv("QUIVER_E2E_ADMIN_TOKEN", safetyAdminToken)
	record := filepath.Join(t.TempDir(), "calls.jsonl")
	var reps []replica
	for _, name := range []string{"A", "B", "C"} {
		cfg := replicaFleet(t, t.TempDir(), rs.URL(), record)
		reps = append(reps, replica{name: name, srv: startHTTP(t, "--config", cfg)})
	}
	a, b, c := reps[0], reps[1], reps[2]
	alice := hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}})
	sess := map[string]*mcp.ClientSession{}
	for _, r := range reps {
		sess[r.name] = r.as(t, alice)
	}
	ids := toolIDs(t, sess["A"], "alpha")
	echo, add, bigJSON, whoami := ids["alpha/echo"], ids["alpha/add"], ids["alpha/big_json"], ids["alpha/whoami"]

	t.Run("artifact made on A is viewed on B and C", func(t *testing.T) {
		res, env := execute(t, sess["A"], bigJSON, map[string]any{"items": 3000})
		arts, _ := env["artifacts"].([]any)
		if res.IsError || len(arts) == 0 {
			t.Fatalf("big_json on A kept no artifact: %v", env)
		}
		handle := arts[0].(map[string]any)["handle"].(string)
		for _, name := range []string{"B", "C"} {
			res, v := callTool(t, sess[name], "tool_view", map[string]any{"handle": handle, "selector": map[string]any{"type": "lines", "start": 1, "end": 3}})
			if res.IsError || !strings.Contains(fmt.Sprint(v["text"]), "\n") {
				t.Fatalf("view on %s: %v", name, v)
			}
		}
		// Another principal sees nothing on any replica.
		bob := c.as(t, hsToken(t, "bob", jwt.MapClaims{"groups": []string{"sre"}}))
		if res, v := callTool(t, bob, "tool_view", map[string]any{"handle": handle, "selector": map[string]any{"type": "head"}}); !res.IsError || errCode(v) != "VIEW_FAILED" {
			t.Fatalf("bob viewed alice's artifact: %v", v)
		}
	})

	t.Run("64 concurrent duplicates over 3 replicas dispatch once", func(t *testing.T) {
		args := map[string]any{"tool_id": echo, "args": map[string]any{"text": "pay 64"}, "idempotency_key": "pay-64"}
		var wg sync.WaitGroup
		var mu sync.Mutex
		outcomes := map[string]int{}
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, env := callTool(t, sess[reps[i%3].name], "tool_execute", args)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case !res.IsError:
					outcomes["ok"]++
				default:
					outcomes[errCode(env)]++
				}
			}()
		}
		wg.Wait()
		if n := countCalls(t, record)["alpha/echo"]; n != 1 {
			t.Fatalf("dispatched %d times (outcomes %v)", n, outcomes)
		}
		for code := range outcomes {
			if code != "ok" && code != "IDEMPOTENCY_KEY_IN_PROGRESS" {
				t.Fatalf("unexpected outcome %s: %v", code, outcomes)
			}
		}
		// Once finished, every replica replays it.
		for _, r := range reps {
			res, env := callTool(t, sess[r.name], "tool_execute", args)
			if res.IsError || env["provenance"].(map[string]any)["idempotent_replay"] != true {
				t.Fatalf("replay on %s: %v", r.name, env)
			}
		}
	})

	t.Run("one global rate limit", func(t *testing.T) {
		admitted, limited := 0, 0
		for i := range 9 {
			res, env := execute(t, sess[reps[i%3].name], whoami, map[string]any{})
			switch {
			case !res.IsError:
				admitted++
			case errCode(env) == "RATE_LIMITED":
				limited++
			default:
				t.Fatalf("call %d: %v", i, env)
			}
		}
		if admitted != 5 || limited != 4 {
			t.Fatalf("admitted %d, limited %d; want 5 and 4 over three replicas", admitted, limited)
		}
	})

	t.Run("approval requested on A, granted on B, used once on C", func(t *testing.T) {
		carol := hsToken(t, "carol", nil)
		args := map[string]any{"a": 20, "b": 22}
		_, m := execute(t, a.as(t, carol), add, args)
		id, _ := field(m, "details.approval_id").(string)
		if errCode(m) != "APPROVAL_REQUIRED" || id == "" {
			t.Fatalf("carol on A: %v", m)
		}
		b.admin(t, "POST", "/admin/v1/approvals/"+id+"/grant", nil)
		if res, m := execute(t, c.as(t, carol), add, args); res.IsError {
			t.Fatalf("the approved call on C: %v", m)
		}
		if _, m := execute(t, a.as(t, carol), add, args); errCode(m) != "APPROVAL_REQUIRED" {
			t.Fatalf("the approval was used twice: %v", m)
		}
	})

	t.Run("a 2025-11-25 session of A is unknown to B: 404, so the client re-initializes", func(t *testing.T) {
		post := func(url, session, body string) *http.Response {
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+alice)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if session != "" {
				req.Header.Set("Mcp-Session-Id", session)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			return resp
		}
		resp := post(a.srv.url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize on A: %d, session %q", resp.StatusCode, sid)
		}
		if resp := post(b.srv.url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("A's session on B: %d, want 404", resp.StatusCode)
		}
	})

	t.Run("kill rule via A's admin API denies B's very next call", func(t *testing.T) {
		kill := a.admin(t, "POST", "/admin/v1/kill", map[string]any{"server": []string{"alpha"}, "reason": "e2e"})
		before := countCalls(t, record)["alpha/add"]
		for _, r := range []replica{b, c} {
			_, m := execute(t, sess[r.name], add, map[string]any{"a": 1, "b": 2})
			if !hasString(field(m, "details.reason_codes"), "KILL_SWITCH") {
				t.Fatalf("%s after the kill: %v", r.name, m)
			}
		}
		if countCalls(t, record)["alpha/add"] != before {
			t.Fatal("a killed call reached the upstream")
		}
		a.admin(t, "DELETE", "/admin/v1/kill/"+kill["value"].(map[string]any)["id"].(string), nil)
		if res, m := execute(t, sess["B"], add, map[string]any{"a": 1, "b": 2}); res.IsError {
			t.Fatalf("B after the kill was lifted: %v", m)
		}
	})

	t.Run("a replica killed with SIGKILL loses no record", func(t *testing.T) {
		args := map[string]any{"tool_id": echo, "args": map[string]any{"text": "pay 9"}, "idempotency_key": "pay-9"}
		if res, env := callTool(t, sess["C"], "tool_execute", args); res.IsError {
			t.Fatalf("write on C: %v", env)
		}
		must(t, c.srv.cmd.Process.Signal(syscall.SIGKILL))
		<-c.srv.done
		res, env := callTool(t, sess["A"], "tool_execute", args)
		if res.IsError || env["provenance"].(map[string]any)["idempotent_replay"] != true {
			t.Fatalf("after C was killed, A does not replay C's write: %v", env)
		}
		if n := countCalls(t, record)["alpha/echo"]; n != 2 {
			t.Fatalf("echo dispatched %d times, want 2 (pay-64 and pay-9)", n)
		}
	})

	t.Run("Redis down: fail closed; back: recover without a restart", func(t *testing.T) {
		rs.Stop()
		before := countCalls(t, record)
		// Over HTTP with auth the token cannot be checked against the
		// revocations: 503 before MCP, so the client retries rather than
		// re-authenticates. Nothing reaches the upstream either way.
		for _, call := range []struct {
			id   string
			args map[string]any
		}{{add, map[string]any{"a": 1, "b": 1}}, {echo, map[string]any{"text": "no record, no write"}}} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			res, err := sess["A"].CallTool(ctx, &mcp.CallToolParams{Name: "tool_execute", Arguments: map[string]any{"tool_id": call.id, "args": call.args, "idempotency_key": "down-1"}})
			cancel()
			if err == nil {
				t.Fatalf("with Redis down the call was answered: %v", res.Content)
			}
			if !strings.Contains(err.Error(), "Service Unavailable") && !strings.Contains(err.Error(), "503") {
				t.Fatalf("with Redis down: %v, want a 503", err)
			}
		}
		if after := countCalls(t, record); after["alpha/add"] != before["alpha/add"] || after["alpha/echo"] != before["alpha/echo"] {
			t.Fatalf("a call reached the upstream while Redis was down: %v -> %v", before, after)
		}
		rs.Restart()
		deadline := time.Now().Add(15 * time.Second)
		for {
			res, env := execute(t, sess["A"], add, map[string]any{"a": 2, "b": 2})
			if !res.IsError {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("A did not recover after Redis came back: %v", env)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The records written before the outage survived it.
		res, env := callTool(t, sess["B"], "tool_execute", map[string]any{"tool_id": echo, "args": map[string]any{"text": "pay 9"}, "idempotency_key": "pay-9"})
		if res.IsError || env["provenance"].(map[string]any)["idempotent_replay"] != true {
			t.Fatalf("after the restart: %v", env)
		}
	})
}

// replicaPolicy: SREs may do everything; carol lists, and calls alpha's
// add only with an operator's approval.
const replicaPolicy = `policy_id: replicas
rules:
  - id: sre-everything
    priority: 100
    effect: allow
    match: {principal: {claims: {groups: [sre]}}}
  - id: carol-add-approval
    priority: 90
    effect: require_approval
    match: {principal: {sub: carol}, tool_id: ["alpha:add#*"]}
  - id: carol-list
    effect: allow
    match: {principal: {sub: carol}, action: [list]}
`

// replicaFleet writes the configuration of a replica sharing state in the
// Redis at redisURL: its own state directory (receipts) and upstream
// process, the shared call record, auth, a policy, the admin API, a
// registry that classifies alpha's echo as a write, and a global rate
// limit on alpha's whoami.
func replicaFleet(t *testing.T, dir, redisURL, record string) string {
	t.Helper()
	reg := filepath.Join(dir, "registry")
	must(t, os.MkdirAll(reg, 0o755))
	data, err := os.ReadFile(filepath.Join("testdata", "registry", "alpha.json"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(reg, "alpha.json"), data, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(replicaPolicy), 0o644))
	cfg := fmt.Sprintf(`environment: dev
state_dir: %s
state:
  backend: redis
  redis: {url: %q}
log: {level: debug}
registry: [registry/*.json]
auth:
  issuers:
    - name: ci
      iss: quiver-ci
      audiences: [quiver]
      alg: HS256
      hs256_secret_env: QUIVER_E2E_JWT_SECRET
policy: {file: policy.yaml}
admin: {token_env: QUIVER_E2E_ADMIN_TOKEN}
rate_limits:
  "tool:alpha:whoami*": {max_calls_per_minute: 5}
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-record", %q]
`, filepath.Join(dir, "state"), redisURL, upstreamBin, record)
	path := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(path, []byte(cfg), 0o644))
	return path
}

// countCalls counts the tools/call requests in a call record by
// "server/tool".
func countCalls(t *testing.T, record string) map[string]int {
	return guardFleet{record: record}.calls(t)
}

// TestE2EServeStateErrors: a Redis that cannot be used is a one-line error
// at start, exit 2, naming what to fix.
func TestE2EServeStateErrors(t *testing.T) {
	locked := redistest.Start(t, redistest.WithPassword("s3cret-pass"))
	dir := t.TempDir()
	cases := []struct {
		name, redis, want string
		env               []string
	}{
		{"refused", `{url: "redis://127.0.0.1:1/0"}`, "refused the connection", nil},
		{"needs a password", fmt.Sprintf(`{url: %q}`, locked.URL()), "password", nil},
		{"wrong password", fmt.Sprintf(`{url: %q, password_env: QUIVER_E2E_REDIS_PW}`, locked.URL()), "password", []string{"QUIVER_E2E_REDIS_PW=wrong"}},
		{"password_env unset", fmt.Sprintf(`{url: %q, password_env: QUIVER_E2E_NO_SUCH_VAR}`, locked.URL()), "QUIVER_E2E_NO_SUCH_VAR", nil},
		{"not a redis url", `{url: "http://127.0.0.1:6379"}`, "redis:// or rediss://", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("state_dir: %s\nstate:\n  backend: redis\n  redis: %s\n", filepath.Join(dir, "state"), tc.redis)), 0o644))
			cmd := exec.Command(quiverBin, "serve", "--config", cfg)
			cmd.Env = append(os.Environ(), tc.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit %v; stderr %s", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "quiver: ") || !strings.Contains(last, tc.want) || strings.Contains(stderr.String(), "s3cret-pass") {
				t.Fatalf("last line %q lacks %q (stderr %s)", last, tc.want, stderr.String())
			}
		})
	}
}
