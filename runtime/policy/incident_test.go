package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

func TestIncident(t *testing.T) {
	c := newTestClock()
	ctx := context.Background()
	kv := state.NewMemory(c.Now)
	in, err := NewIncident(IncidentOptions{KV: kv, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	tok := alice
	tok.JTI = "jti-9"
	high := Request{Principal: tok, Server: "github", Namespace: "github", ToolID: "github:delete_repo#22222222", ToolClass: "write", Risk: "HIGH", SessionID: "s1", Action: ActionCall}
	low := high
	low.Risk, low.ToolClass, low.ToolID = "LOW", "read", "github:list#1"
	check := func(name string, r Request, code string) {
		t.Helper()
		denied, reason := in.Check(ctx, r)
		if denied != (code != "") || reason != code {
			t.Fatalf("%s: denied=%v reason=%q, want %q", name, denied, reason, code)
		}
	}
	check("nothing in force", high, "")
	if in.Active(ctx) {
		t.Fatal("active at start")
	}

	// Incident mode: high-risk tools are denied at once.
	if err := in.Enable(ctx, "ops", "supply chain alert", ""); err != nil {
		t.Fatal(err)
	}
	if !in.Active(ctx) {
		t.Fatal("not active")
	}
	check("incident mode high", high, ReasonIncidentMode)
	check("incident mode low", low, "")
	crit := low
	crit.Risk = "bogus"
	check("unknown risk counts as critical", crit, ReasonIncidentMode)
	if err := in.Disable(ctx); err != nil {
		t.Fatal(err)
	}
	check("disabled", high, "")

	// Kill rules.
	k, err := in.AddKill(ctx, KillRule{Server: []string{"git*"}, ToolClass: []string{"write"}, Reason: "bad release", By: "ops"})
	if err != nil || k.ID == "" {
		t.Fatal(err)
	}
	if !in.Active(ctx) {
		t.Fatal("a kill rule makes incident mode active")
	}
	if d, _ := in.Evaluate(ctx, high); d.Code != ReasonKillSwitch || d.RuleID != k.ID {
		t.Fatalf("%+v", d)
	}
	check("kill rule does not match reads", low, "")
	byID, _ := in.AddKill(ctx, KillRule{ID: "list-kill", ToolID: []string{"github:list*"}})
	check("glob kill", low, ReasonKillSwitch)
	if err := in.RemoveKill(ctx, byID.ID); err != nil {
		t.Fatal(err)
	}
	check("kill lifted", low, "")
	if err := in.RemoveKill(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	for _, bad := range []KillRule{{}, {All: true, MinRisk: "HIGH"}, {MinRisk: "HUGE"}, {ToolID: []string{`x\`}}} {
		if _, err := in.AddKill(ctx, bad); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	if _, err := in.AddKill(ctx, KillRule{ID: k.ID, All: true}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatal("duplicate kill id accepted")
	}
	if err := in.RemoveKill(ctx, k.ID); err != nil {
		t.Fatal(err)
	}

	// Revocations and quarantine.
	if err := in.Quarantine(ctx, "s1", "ops", "anomaly", time.Time{}); err != nil {
		t.Fatal(err)
	}
	check("quarantined session", low, ReasonSessionQuarantined)
	other := low
	other.SessionID = "s2"
	check("other session", other, "")
	if err := in.RevokeToken(ctx, "jti-9", "ops", "leaked", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("revoked token", other, ReasonTokenRevoked)
	if !revoked(ctx, in, "jti-9", "nobody") || revoked(ctx, in, "jti-8", "nobody") {
		t.Fatal("Revoked by jti")
	}
	if err := in.RevokePrincipal(ctx, "jwt:corp:bob.smith", "ops", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	rb := other
	rb.Principal = bob
	check("revoked principal key", rb, ReasonPrincipalRevoked)
	if err := in.RevokePrincipal(ctx, "carol", "ops", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !revoked(ctx, in, "", "carol") {
		t.Fatal("Revoked by sub")
	}
	if err := in.RevokeToken(ctx, "x", "ops", "", c.Now().Add(-time.Second)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatal("revocation in the past accepted")
	}

	// Another process on the same KV sees everything.
	in2, err := NewIncident(IncidentOptions{KV: kv, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := in2.State(ctx)
	if len(st.Sessions) != 1 || len(st.Tokens) != 1 || len(st.Principals) != 2 || len(st.Kill) != 0 {
		t.Fatalf("state after restart %+v", st)
	}
	check2 := func(r Request, code string) {
		t.Helper()
		if _, reason := in2.Check(ctx, r); reason != code {
			t.Fatalf("after restart: %q, want %q", reason, code)
		}
	}
	check2(low, ReasonSessionQuarantined)
	// A timed revocation lapses.
	c.Advance(2 * time.Hour)
	check2(other, "")
	if err := in2.Release(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if st, _ := in2.State(ctx); len(st.Tokens) != 0 {
		t.Fatalf("lapsed revocation kept: %+v", st.Tokens)
	}
	if err := in2.RestorePrincipal(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	if err := in2.RestoreToken(ctx, "jti-9"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}

	// An unreadable stored state denies, it does not allow.
	if err := kv.Set(ctx, IncidentKey, []byte("{not json"), 0); err != nil {
		t.Fatal(err)
	}
	if d, err := in2.Evaluate(ctx, low); !errors.Is(err, ErrIncidentState) || !d.Denied || d.Code != ReasonStateUnavailable {
		t.Fatalf("corrupt state: %+v %v", d, err)
	}
}

func TestIncidentAllKill(t *testing.T) {
	ctx := context.Background()
	in, _ := NewIncident(IncidentOptions{KV: state.NewMemory(nil)})
	if _, err := in.AddKill(ctx, KillRule{All: true}); err != nil {
		t.Fatal(err)
	}
	if denied, _ := in.Check(ctx, Request{Principal: identity.Principal{Sub: "x"}, Risk: "LOW", Action: ActionList}); !denied {
		t.Fatal("all: true did not deny")
	}
}

// TestIncidentShared: a change made through one process is in force at
// the very next check of another on the same KV, and concurrent changes
// through both are all kept (the Swap loop loses none).
func TestIncidentShared(t *testing.T) {
	ctx := context.Background()
	kv := state.NewMemory(nil)
	a, _ := NewIncident(IncidentOptions{KV: kv})
	b, _ := NewIncident(IncidentOptions{KV: kv})
	req := Request{Principal: alice, Server: "github", ToolID: "github:x#1", Risk: "LOW", Action: ActionCall}
	if denied, _ := b.Check(ctx, req); denied {
		t.Fatal("denied before any rule")
	}
	k, err := a.AddKill(ctx, KillRule{Server: []string{"github"}})
	if err != nil {
		t.Fatal(err)
	}
	if denied, code := b.Check(ctx, req); !denied || code != ReasonKillSwitch {
		t.Fatalf("kill rule set through a: %v %s", denied, code)
	}
	if err := b.RemoveKill(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if denied, _ := a.Check(ctx, req); denied {
		t.Fatal("kill rule lifted through b still denies in a")
	}
	var wg sync.WaitGroup
	for i := range 20 {
		in := a
		if i%2 == 1 {
			in = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := in.Quarantine(ctx, fmt.Sprintf("s%d", i), "ops", "", time.Time{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, err := b.State(ctx)
	if err != nil || len(st.Sessions) != 20 || st.Version != 22 {
		t.Fatalf("after concurrent changes: %d sessions, version %d, %v", len(st.Sessions), st.Version, err)
	}
}

// TestIncidentUnavailable: with the KV down, every check denies with
// STATE_UNAVAILABLE (fail closed), changes fail, and the checks recover
// with the KV.
func TestIncidentUnavailable(t *testing.T) {
	ctx := context.Background()
	kv := statetest.NewFailing(state.NewMemory(nil))
	in, _ := NewIncident(IncidentOptions{KV: kv})
	req := Request{Principal: alice, ToolID: "github:x#1", Risk: "LOW", Action: ActionList}
	kv.SetDown(true)
	if d, err := in.Evaluate(ctx, req); !d.Denied || d.Code != ReasonStateUnavailable || !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("evaluate: %+v %v", d, err)
	}
	if r, err := in.Revoked(ctx, "", "alice"); !r || !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("Revoked without the state: %v, %v", r, err)
	}
	if err := in.Enable(ctx, "ops", "", ""); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("enable: %v", err)
	}
	kv.SetDown(false)
	if denied, _ := in.Check(ctx, req); denied {
		t.Fatal("still denied after recovery")
	}
}

// TestIncidentPin: the checks made with a pinned context read the state
// once; a change made after the pin is seen by the next request.
func TestIncidentPin(t *testing.T) {
	ctx := context.Background()
	kv := &countingKV{KV: state.NewMemory(nil)}
	in, _ := NewIncident(IncidentOptions{KV: kv})
	req := Request{Principal: alice, Server: "github", ToolID: "github:x#1", Risk: "LOW", Action: ActionList}
	pinned := in.Pin(ctx)
	for range 10 {
		if denied, _ := in.Check(pinned, req); denied {
			t.Fatal("denied")
		}
	}
	if n := kv.gets.Load(); n != 1 {
		t.Fatalf("%d reads for one pinned request", n)
	}
	if _, err := in.AddKill(ctx, KillRule{All: true}); err != nil {
		t.Fatal(err)
	}
	if denied, _ := in.Check(in.Pin(ctx), req); !denied {
		t.Fatal("the next request missed the kill rule")
	}
	down := statetest.NewFailing(state.NewMemory(nil))
	down.SetDown(true)
	in2, _ := NewIncident(IncidentOptions{KV: down})
	if denied, code := in2.Check(in2.Pin(ctx), req); !denied || code != ReasonStateUnavailable {
		t.Fatalf("a failed pinned read: %v %s", denied, code)
	}
}

// countingKV counts Gets.
type countingKV struct {
	state.KV
	gets atomic.Int32
}

func (c *countingKV) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.KV.Get(ctx, key)
}

// revoked is Incident.Revoked for tests that only want the answer.
func revoked(ctx context.Context, in *Incident, jti, who string) bool {
	r, err := in.Revoked(ctx, jti, who)
	return r && err == nil
}

// Incident mode's egress block denies calls that reach the network,
// whatever their risk, and only while incident mode is on.
func TestIncidentEgressBlock(t *testing.T) {
	ctx := context.Background()
	in, err := NewIncident(IncidentOptions{KV: state.NewMemory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	net := Request{Principal: alice, Server: "web", ToolID: "web:fetch#1", Risk: "LOW", Action: ActionCall, Egress: true}
	local := net
	local.Egress = false
	if d, _ := in.Check(ctx, net); d || in.EgressBlocked(ctx) {
		t.Fatal("blocked with incident mode off")
	}
	if err := in.Enable(ctx, "ops", "exfil", "CRITICAL"); err != nil {
		t.Fatal(err)
	}
	if d, _ := in.Check(ctx, net); d || in.EgressBlocked(ctx) {
		t.Fatal("blocked without egress_block")
	}
	if err := in.EnableMode(ctx, IncidentMode{By: "ops", DenyMinRisk: "CRITICAL", EgressBlock: true}); err != nil {
		t.Fatal(err)
	}
	if d, code := in.Check(ctx, net); !d || code != ReasonEgressBlock || !in.EgressBlocked(ctx) {
		t.Fatalf("egress call: %v %q", d, code)
	}
	if d, _ := in.Check(ctx, local); d {
		t.Fatal("a call without egress is blocked")
	}
	if err := in.Disable(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := in.Check(ctx, net); d || in.EgressBlocked(ctx) {
		t.Fatal("blocked after disable")
	}
	// Fail closed: an unreadable state blocks egress.
	kv := statetest.NewFailing(state.NewMemory(nil))
	down, _ := NewIncident(IncidentOptions{KV: kv})
	kv.SetDown(true)
	if !down.EgressBlocked(ctx) {
		t.Fatal("an unreadable state does not block egress")
	}
}

// Auto-quarantine: two replicas on one KV count a principal's denials
// together; at the threshold the principal is quarantined (every request
// denied), OnRevoke hears of it, others are untouched, and Release lifts
// it.
func TestAutoQuarantine(t *testing.T) {
	ctx := context.Background()
	c := newTestClock()
	kv := state.NewMemory(c.Now)
	var revoked []string
	var mu sync.Mutex
	opts := IncidentOptions{KV: kv, Now: c.Now, QuarantineDenials: 5, QuarantineWindow: time.Minute,
		OnRevoke: func(_ context.Context, kind RevocationKind, id string) {
			mu.Lock()
			defer mu.Unlock()
			revoked = append(revoked, fmt.Sprint(kind, id))
		}}
	a, _ := NewIncident(opts)
	b, _ := NewIncident(opts)
	key := alice.Key()
	req := Request{Principal: alice, Server: "s", ToolID: "s:t#1", Risk: "LOW", Action: ActionCall}
	for i := 1; i <= 4; i++ {
		in := a
		if i%2 == 0 {
			in = b
		}
		if q, err := in.Denied(ctx, key); err != nil || q {
			t.Fatalf("denial %d: quarantined=%v err=%v", i, q, err)
		}
	}
	if d, _ := b.Check(ctx, req); d {
		t.Fatal("quarantined below the threshold")
	}
	// The window slides: old denials stop counting.
	c.Advance(2 * time.Minute)
	for i := 1; i <= 4; i++ {
		if q, _ := a.Denied(ctx, key); q {
			t.Fatalf("denial %d after the window: quarantined", i)
		}
	}
	if q, err := b.Denied(ctx, key); err != nil || !q {
		t.Fatalf("5th denial in the window: quarantined=%v err=%v", q, err)
	}
	if d, code := a.Check(ctx, req); !d || code != ReasonPrincipalQuarantined {
		t.Fatalf("after quarantine: %v %q", d, code)
	}
	bob := req
	bob.Principal = identity.Principal{Sub: "bob", Issuer: "ci"}
	if d, _ := a.Check(ctx, bob); d {
		t.Fatal("another principal is quarantined")
	}
	st, _ := a.State(ctx)
	if r, ok := st.Quarantined[key]; !ok || r.By != "quiver" {
		t.Fatalf("state %+v", st.Quarantined)
	}
	mu.Lock()
	if len(revoked) != 1 || revoked[0] != fmt.Sprint(RevokedPrincipal, key) {
		t.Fatalf("OnRevoke calls %v", revoked)
	}
	mu.Unlock()
	if err := b.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	if d, _ := a.Check(ctx, req); d {
		t.Fatal("still quarantined after release")
	}
	if err := b.Release(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second release: %v", err)
	}
	// Off: no counting at all.
	off, _ := NewIncident(IncidentOptions{KV: kv})
	for range 100 {
		if q, _ := off.Denied(ctx, key); q {
			t.Fatal("quarantined with the thresholds off")
		}
	}
	// A threshold of 1 quarantines at the first denial.
	one, _ := NewIncident(IncidentOptions{KV: state.NewMemory(nil), QuarantineDenials: 1, QuarantineWindow: time.Minute})
	if q, _ := one.Denied(ctx, key); !q {
		t.Fatal("threshold 1")
	}
}
