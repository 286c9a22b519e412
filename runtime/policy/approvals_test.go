package policy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func newTestClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestApprovalsFlow(t *testing.T) {
	ctx := context.Background()
	c := newTestClock()
	a, err := NewApprovals(ApprovalOptions{KV: state.NewMemory(c.Now), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	const tool, args = "github:delete_repo#22222222", "aa11"
	if ok, rec, _ := a.Check(ctx, alice, tool, args); ok || rec.ID != "" {
		t.Fatal("granted before any request")
	}
	req, err := a.Request(ctx, alice, tool, args, "")
	if err != nil || req.Status != ApprovalPending || req.ID == "" || !req.ExpiresAt.Equal(c.Now().Add(DefaultApprovalTTL)) {
		t.Fatalf("%+v %v", req, err)
	}
	// A retried call before the grant gets the same request back.
	again, _ := a.Request(ctx, alice, tool, args, "")
	if again.ID != req.ID {
		t.Fatal("a retry created a second request")
	}
	if ok, rec, _ := a.Check(ctx, alice, tool, args); ok || rec.ID != req.ID || rec.Status != ApprovalPending {
		t.Fatalf("pending approval passed: %+v", rec)
	}
	if p := mustPending(t, a); len(p) != 1 || p[0].ID != req.ID {
		t.Fatalf("pending %+v", p)
	}
	c.Advance(time.Minute)
	g, err := a.Grant(ctx, req.ID, "ops@example", c.Now())
	if err != nil || g.Status != ApprovalGranted || g.DecidedBy != "ops@example" {
		t.Fatalf("%+v %v", g, err)
	}
	if _, err := a.Grant(ctx, req.ID, "ops@example", c.Now()); !errors.Is(err, ErrApprovalDecided) {
		t.Fatalf("second grant: %v", err)
	}
	// Another principal, other args or another tool do not benefit.
	if ok, _, _ := a.Check(ctx, bob, tool, args); ok {
		t.Fatal("another principal used the approval")
	}
	if ok, _, _ := a.Check(ctx, alice, tool, "bb22"); ok {
		t.Fatal("other arguments used the approval")
	}
	if ok, _, _ := a.Check(ctx, alice, "github:other#1", args); ok {
		t.Fatal("another tool used the approval")
	}
	// The same call proceeds once.
	ok, rec, _ := a.Check(ctx, alice, tool, args)
	if !ok || rec.Status != ApprovalUsed || rec.DecidedBy != "ops@example" {
		t.Fatalf("%v %+v", ok, rec)
	}
	if ok, _, _ := a.Check(ctx, alice, tool, args); ok {
		t.Fatal("approval used twice")
	}
	// A new request after use is a new approval.
	if n, _ := a.Request(ctx, alice, tool, args, ""); n.ID == req.ID || n.Status != ApprovalPending {
		t.Fatalf("%+v", n)
	}
	if _, err := a.Grant(ctx, "nope", "ops", c.Now()); !errors.Is(err, ErrApprovalNotFound) {
		t.Fatal(err)
	}
	if _, err := a.Request(ctx, identity.Principal{}, tool, args, ""); err == nil {
		t.Fatal("request without principal")
	}
}

func TestApprovalsTTL(t *testing.T) {
	ctx := context.Background()
	c := newTestClock()
	a, _ := NewApprovals(ApprovalOptions{KV: state.NewMemory(c.Now), Now: c.Now, TTL: 10 * time.Minute})
	req, _ := a.Request(ctx, alice, "t", "h", "")
	c.Advance(11 * time.Minute)
	if _, err := a.Grant(ctx, req.ID, "ops", c.Now()); !errors.Is(err, ErrApprovalExpired) {
		t.Fatalf("late grant: %v", err)
	}
	req, _ = a.Request(ctx, alice, "t", "h", "")
	if _, err := a.Grant(ctx, req.ID, "ops", c.Now()); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Minute)
	if ok, _, _ := a.Check(ctx, alice, "t", "h"); ok {
		t.Fatal("granted approval usable after its TTL")
	}
	denied, _ := a.Request(ctx, alice, "t2", "h", "")
	if d, err := a.Deny(ctx, denied.ID, "ops", c.Now()); err != nil || d.Status != ApprovalDenied {
		t.Fatal(err)
	}
	if ok, _, _ := a.Check(ctx, alice, "t2", "h"); ok {
		t.Fatal("denied approval passed")
	}
}

func TestApprovalsMaxPending(t *testing.T) {
	ctx := context.Background()
	a, _ := NewApprovals(ApprovalOptions{KV: state.NewMemory(nil), MaxPending: 2})
	for i, h := range []string{"1", "2"} {
		if _, err := a.Request(ctx, alice, "t", h, ""); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := a.Request(ctx, alice, "t", "3", ""); !errors.Is(err, ErrTooManyPending) {
		t.Fatal(err)
	}
	if _, err := a.Request(ctx, bob, "t", "3", ""); err != nil {
		t.Fatal("the cap is per principal:", err)
	}
}

func mustPending(t *testing.T, a *Approvals) []Approval {
	t.Helper()
	p, err := a.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApprovalsShared: two stores on one KV are two replicas. An approval
// requested through one is granted through the other, and of many
// concurrent Checks spread over both exactly one is let through.
func TestApprovalsShared(t *testing.T) {
	ctx := context.Background()
	kv := state.NewMemory(nil)
	a, _ := NewApprovals(ApprovalOptions{KV: kv})
	b, _ := NewApprovals(ApprovalOptions{KV: kv})
	req, err := a.Request(ctx, alice, "t", "h", "")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := b.Request(ctx, alice, "t", "h", ""); again.ID != req.ID {
		t.Fatal("the other replica made a second request")
	}
	if got, ok, err := b.Get(ctx, req.ID); err != nil || !ok || got.Status != ApprovalPending {
		t.Fatalf("get through b: %+v %v %v", got, ok, err)
	}
	if _, err := b.Grant(ctx, req.ID, "ops", time.Now()); err != nil {
		t.Fatal(err)
	}
	var passed atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, _, err := s.Check(ctx, alice, "t", "h")
			if err != nil {
				t.Error(err)
			}
			if ok {
				passed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := passed.Load(); n != 1 {
		t.Fatalf("%d calls used one approval", n)
	}
	if p := mustPending(t, b); len(p) != 0 {
		t.Fatalf("pending %+v", p)
	}
}

// TestApprovalsUnavailable: every operation on a store that cannot be
// reached fails with state.ErrUnavailable, and Check denies.
func TestApprovalsUnavailable(t *testing.T) {
	ctx := context.Background()
	kv := statetest.NewFailing(state.NewMemory(nil))
	a, _ := NewApprovals(ApprovalOptions{KV: kv})
	req, _ := a.Request(ctx, alice, "t", "h", "")
	if _, err := a.Grant(ctx, req.ID, "ops", time.Now()); err != nil {
		t.Fatal(err)
	}
	kv.SetDown(true)
	ok, _, err := a.Check(ctx, alice, "t", "h")
	if ok || !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("check with the store down: %v %v", ok, err)
	}
	for name, err := range map[string]error{
		"request": func() error { _, err := a.Request(ctx, alice, "t", "h2", ""); return err }(),
		"grant":   func() error { _, err := a.Grant(ctx, req.ID, "ops", time.Now()); return err }(),
		"get":     func() error { _, _, err := a.Get(ctx, req.ID); return err }(),
		"pending": func() error { _, err := a.Pending(ctx); return err }(),
	} {
		if !errors.Is(err, state.ErrUnavailable) {
			t.Errorf("%s: %v", name, err)
		}
	}
	kv.SetDown(false)
	if ok, _, err := a.Check(ctx, alice, "t", "h"); !ok || err != nil {
		t.Fatalf("after recovery: %v %v", ok, err)
	}
}
