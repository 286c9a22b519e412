package policy

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
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
	c := newTestClock()
	a, err := OpenApprovals(ApprovalOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const tool, args = "github:delete_repo#22222222", "aa11"
	if ok, rec := a.Check(alice, tool, args); ok || rec.ID != "" {
		t.Fatal("granted before any request")
	}
	req, err := a.Request(alice, tool, args)
	if err != nil || req.Status != ApprovalPending || req.ID == "" || !req.ExpiresAt.Equal(c.Now().Add(DefaultApprovalTTL)) {
		t.Fatalf("%+v %v", req, err)
	}
	// A retried call before the grant gets the same request back.
	again, _ := a.Request(alice, tool, args)
	if again.ID != req.ID {
		t.Fatal("a retry created a second request")
	}
	if ok, rec := a.Check(alice, tool, args); ok || rec.ID != req.ID || rec.Status != ApprovalPending {
		t.Fatalf("pending approval passed: %+v", rec)
	}
	if p := a.Pending(); len(p) != 1 || p[0].ID != req.ID {
		t.Fatalf("pending %+v", p)
	}
	c.Advance(time.Minute)
	g, err := a.Grant(req.ID, "ops@example", c.Now())
	if err != nil || g.Status != ApprovalGranted || g.DecidedBy != "ops@example" {
		t.Fatalf("%+v %v", g, err)
	}
	if _, err := a.Grant(req.ID, "ops@example", c.Now()); !errors.Is(err, ErrApprovalDecided) {
		t.Fatalf("second grant: %v", err)
	}
	// Another principal, other args or another tool do not benefit.
	if ok, _ := a.Check(bob, tool, args); ok {
		t.Fatal("another principal used the approval")
	}
	if ok, _ := a.Check(alice, tool, "bb22"); ok {
		t.Fatal("other arguments used the approval")
	}
	if ok, _ := a.Check(alice, "github:other#1", args); ok {
		t.Fatal("another tool used the approval")
	}
	// The same call proceeds once.
	ok, rec := a.Check(alice, tool, args)
	if !ok || rec.Status != ApprovalUsed || rec.DecidedBy != "ops@example" {
		t.Fatalf("%v %+v", ok, rec)
	}
	if ok, _ := a.Check(alice, tool, args); ok {
		t.Fatal("approval used twice")
	}
	// A new request after use is a new approval.
	if n, _ := a.Request(alice, tool, args); n.ID == req.ID || n.Status != ApprovalPending {
		t.Fatalf("%+v", n)
	}
	if _, err := a.Grant("nope", "ops", c.Now()); !errors.Is(err, ErrApprovalNotFound) {
		t.Fatal(err)
	}
	if _, err := a.Request(identity.Principal{}, tool, args); err == nil {
		t.Fatal("request without principal")
	}
}

func TestApprovalsTTL(t *testing.T) {
	c := newTestClock()
	a, _ := OpenApprovals(ApprovalOptions{Now: c.Now, TTL: 10 * time.Minute})
	req, _ := a.Request(alice, "t", "h")
	c.Advance(11 * time.Minute)
	if _, err := a.Grant(req.ID, "ops", c.Now()); !errors.Is(err, ErrApprovalExpired) {
		t.Fatalf("late grant: %v", err)
	}
	req, _ = a.Request(alice, "t", "h")
	if _, err := a.Grant(req.ID, "ops", c.Now()); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Minute)
	if ok, _ := a.Check(alice, "t", "h"); ok {
		t.Fatal("granted approval usable after its TTL")
	}
	denied, _ := a.Request(alice, "t2", "h")
	if d, err := a.Deny(denied.ID, "ops", c.Now()); err != nil || d.Status != ApprovalDenied {
		t.Fatal(err)
	}
	if ok, _ := a.Check(alice, "t2", "h"); ok {
		t.Fatal("denied approval passed")
	}
}

func TestApprovalsMaxPending(t *testing.T) {
	a, _ := OpenApprovals(ApprovalOptions{MaxPending: 2})
	for i, h := range []string{"1", "2"} {
		if _, err := a.Request(alice, "t", h); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := a.Request(alice, "t", "3"); !errors.Is(err, ErrTooManyPending) {
		t.Fatal(err)
	}
	if _, err := a.Request(bob, "t", "3"); err != nil {
		t.Fatal("the cap is per principal:", err)
	}
}

func TestApprovalsPersisted(t *testing.T) {
	dir := t.TempDir()
	c := newTestClock()
	a, err := OpenApprovals(ApprovalOptions{Dir: dir, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := a.Request(alice, "t", "h1")
	r2, _ := a.Request(alice, "t", "h2")
	if _, err := a.Grant(r1.ID, "ops", c.Now()); err != nil {
		t.Fatal(err)
	}
	r3, _ := a.Request(bob, "t", "h3")
	_, _ = a.Grant(r3.ID, "ops", c.Now())
	if ok, _ := a.Check(bob, "t", "h3"); !ok {
		t.Fatal("bob's grant")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Simulate a crash mid-write: a torn last line is ignored.
	path := filepath.Join(dir, approvalsFile)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"approval_id":"torn","sta`)
	f.Close()

	b, err := OpenApprovals(ApprovalOptions{Dir: dir, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, ok := b.Get(r2.ID); !ok || got.Status != ApprovalPending {
		t.Fatalf("r2 after restart: %+v", got)
	}
	if ok, _ := b.Check(bob, "t", "h3"); ok {
		t.Fatal("a used approval came back after restart")
	}
	if ok, rec := b.Check(alice, "t", "h1"); !ok || rec.ID != r1.ID {
		t.Fatal("granted approval lost across restart")
	}
	if ok, _ := b.Check(alice, "t", "h1"); ok {
		t.Fatal("used twice")
	}
	// A bad line in the middle of the journal refuses to open.
	if err := os.WriteFile(path, []byte("garbage\n{\"approval_id\":\"x\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenApprovals(ApprovalOptions{Dir: dir}); err == nil {
		t.Fatal("corrupt journal opened")
	}
}
