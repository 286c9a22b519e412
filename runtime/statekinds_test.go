package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	qstate "github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

// failingBackend is a memory backend whose KV a test can take down.
type failingBackend struct {
	qstate.Backend
	kv *statetest.Failing
}

func (b failingBackend) KV() qstate.KV { return b.kv }

func newFailingBackend(t *testing.T) failingBackend {
	t.Helper()
	b := memoryBackend(t)
	return failingBackend{Backend: b, kv: statetest.NewFailing(b.KV())}
}

// TestStateUnavailableFailsClosed: with the state backend down, every kind
// of state refuses the call with STATE_UNAVAILABLE (retryable), before
// anything reaches the upstream, and the receipt records no allow; with the
// backend back, the same call goes through.
func TestStateUnavailableFailsClosed(t *testing.T) {
	approval, err := policy.Parse("p.yaml", []byte(`policy_id: approvals
rules:
  - {id: all, effect: allow, match: {}}
  - {id: add-approval, priority: 10, effect: require_approval, match: {tool_id: ["alpha:add*"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		tool string
		args map[string]any
		mut  func(*rig)
	}{
		// The incident state is read by every check.
		{name: "incident", tool: "add", args: map[string]any{"a": 1, "b": 2}},
		// The others keep the incident state in process memory, so that
		// the kind under test is the one that meets the failure.
		{name: "rate limit", tool: "add", args: map[string]any{"a": 1, "b": 2}, mut: func(r *rig) {
			r.cfg.Incident.Persist = false
			r.cfg.RateLimits = map[string]config.RateLimit{"tool_execute": {MaxCallsPerMinute: 100}}
		}},
		{name: "idempotent write", tool: "echo", args: map[string]any{"text": "pay"}, mut: func(r *rig) {
			r.cfg.Incident.Persist = false
		}},
		{name: "approval", tool: "add", args: map[string]any{"a": 1, "b": 2}, mut: func(r *rig) {
			r.cfg.Incident.Persist = false
			r.cfg.Auth.Local.Sub = "alice"
			r.deps.Policy = approval
		}},
	}
	full := fmt.Errorf("redis: %w: OOM command not allowed when used memory > 'maxmemory'", qstate.ErrTooLarge)
	for _, failure := range []error{qstate.ErrUnavailable, full} {
		for _, tc := range cases {
			t.Run(tc.name+"/"+failure.Error()[:12], func(t *testing.T) {
				backend := newFailingBackend(t)
				backend.kv.FailWith(failure)
				dir := t.TempDir()
				rt, cs, record := guardedAlpha(t, func(r *rig) {
					r.deps.State = backend
					r.cfg.StateDir = dir
					if tc.mut != nil {
						tc.mut(r)
					}
				})
				args := map[string]any{"tool_id": idOf(t, rt, "alpha", tc.tool), "args": tc.args, "idempotency_key": "k-1"}
				backend.kv.SetDown(true)
				e := wantError(t, cs, ToolExecute, args, CodeStateUnavailable)
				if e["retryable"] != true {
					t.Fatalf("STATE_UNAVAILABLE not retryable: %v", e)
				}
				if calls := recordedCalls(t, record); len(calls) != 0 {
					t.Fatalf("the upstream was called with the state down: %v", calls)
				}
				if err := rt.rec.out.Flush(); err != nil {
					t.Fatal(err)
				}
				denied := false
				err := receipts.Reader{Dir: filepath.Join(dir, receipts.DirName)}.Query(context.Background(), receipts.Filter{}, func(r receipts.Receipt) error {
					// deny, or the policy's require_approval it could not
					// settle: never allow.
					denied = denied || (r.Outcome.ErrorCode == CodeStateUnavailable && r.Decision.Result != "allow")
					return nil
				})
				if err != nil || !denied {
					t.Fatalf("no deny receipt with STATE_UNAVAILABLE (%v)", err)
				}
				backend.kv.SetDown(false)
				res, m := runExec(t, cs, args)
				if tc.name == "approval" {
					if m["error"] != CodeApprovalRequired {
						t.Fatalf("after recovery: %v", m)
					}
					return
				}
				if res.IsError {
					t.Fatalf("after recovery: %v", m)
				}
			})
		}
	}
}

// TestStateSharedByRuntimes: two runtimes on one backend are two replicas:
// a kill rule set through one denies the very next call of the other, and
// lifting it there lets calls through again; a per-minute rate limit is
// one window for both.
func TestStateSharedByRuntimes(t *testing.T) {
	backend := memoryBackend(t)
	mut := func(r *rig) {
		r.deps.State = backend
		r.cfg.RateLimits = map[string]config.RateLimit{"tool_execute": {MaxCallsPerMinute: 3}}
	}
	rtA, csA, _ := guardedAlpha(t, mut)
	rtB, csB, _ := guardedAlpha(t, mut)
	add := map[string]any{"tool_id": idOf(t, rtA, "alpha", "add"), "args": map[string]any{"a": 1, "b": 2}}
	if res, m := runExec(t, csB, add); res.IsError {
		t.Fatalf("before the kill rule: %v", m)
	}
	ctx := context.Background()
	k, err := rtA.auth.incident.AddKill(ctx, policy.KillRule{Server: []string{"alpha"}})
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, csB, ToolExecute, add, CodePolicyDenied)
	if err := rtB.auth.incident.RemoveKill(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if res, m := runExec(t, csA, add); res.IsError {
		t.Fatalf("after the kill rule was lifted through B: %v", m)
	}
	// Two calls admitted of three (one per runtime); the third of the
	// window, on A, is the last one.
	if res, m := runExec(t, csA, add); res.IsError {
		t.Fatalf("third call: %v", m)
	}
	wantError(t, csB, ToolExecute, add, CodeRateLimited)
}

// TestStateRedisPasswordAtStart: a password_env that names an unset
// variable passes the configuration check and is reported by Start, with
// the variable's name; a CA file that holds no certificate too.
func TestStateRedisPasswordAtStart(t *testing.T) {
	rg := setup(t, config.ModeGateway, nil, func(r *rig) {
		r.cfg.State = config.State{Backend: config.StateRedis, Redis: config.Redis{URL: "redis://127.0.0.1:6379/0", PasswordEnv: "QUIVER_TEST_REDIS_PW", KeyPrefix: "q:"}}
		r.deps.Getenv = func(string) (string, bool) { return "", false }
	})
	rt, err := New(rg.cfg, rg.deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	err = rt.Start(context.Background())
	if !errors.Is(err, config.ErrRedisPassword) || !strings.Contains(err.Error(), "QUIVER_TEST_REDIS_PW") {
		t.Fatalf("start: %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := redisTLS(config.Redis{URL: "rediss://h:6380", TLS: config.RedisTLS{CAFile: ca}}); err == nil {
		t.Fatal("a CA file without a certificate was accepted")
	}
	if tc, err := redisTLS(config.Redis{URL: "redis://h:6379"}); err != nil || tc != nil {
		t.Fatalf("redis:// has no TLS: %v %v", tc, err)
	}
}
