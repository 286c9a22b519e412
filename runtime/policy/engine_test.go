package policy

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
)

// event is one OnChange call.
type event struct {
	p   *Policy
	err error
}

func writePolicy(t *testing.T, path, src string, mod time.Time) {
	t.Helper()
	// Write next to it and rename over it, as editors and config
	// management do, with distinct modification times whatever the file
	// system's resolution.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mod, mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	allowAll := "policy_id: w\nrules:\n  - {id: all, effect: allow}\n"
	denyAll := "policy_id: w\nrules:\n  - {id: none, effect: deny}\n"
	base := time.Now().Add(-time.Hour)
	writePolicy(t, path, allowAll, base)

	e := NewEngine(nil)
	events := make(chan event, 16)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var watchErr error
	go func() {
		defer wg.Done()
		watchErr = e.Watch(ctx, path, WatchOptions{Interval: 5 * time.Millisecond, OnChange: func(p *Policy, err error) {
			events <- event{p, err}
		}})
	}()
	defer func() {
		cancel()
		wg.Wait()
		if watchErr != context.Canceled {
			t.Errorf("Watch returned %v", watchErr)
		}
	}()
	next := func() event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("no OnChange")
		}
		return event{}
	}
	req := Request{Principal: identity.Principal{Sub: "x"}, ToolID: "a:b", Action: ActionCall}

	// The file is read when Watch starts.
	if ev := next(); ev.err != nil || ev.p == nil || e.Decide(req).RuleID != "all" {
		t.Fatalf("initial load: %+v", ev)
	}
	v1 := e.Policy().Version

	// A broken file keeps the old policy and is reported once.
	writePolicy(t, path, "policy_id: w\nrules:\n  - {id: bad, effect: perhaps}\n", base.Add(time.Minute))
	if ev := next(); ev.err == nil || ev.p != nil {
		t.Fatalf("broken file: %+v", ev)
	}
	if e.Policy().Version != v1 || e.Decide(req).Effect != EffectAllow {
		t.Fatal("the broken file replaced the policy")
	}
	// Touching the broken file again is not a new report.
	writePolicy(t, path, "policy_id: w\nrules:\n  - {id: bad, effect: perhaps}\n", base.Add(2*time.Minute))

	// A good file is put in force.
	writePolicy(t, path, denyAll, base.Add(3*time.Minute))
	if ev := next(); ev.err != nil || ev.p == nil || ev.p.Version == v1 {
		t.Fatalf("reload: %+v", ev)
	}
	if d := e.Decide(req); d.Effect != EffectDeny || d.RuleID != "none" {
		t.Fatalf("after reload: %+v", d)
	}

	// A reformatted file with the same rules is not a change.
	writePolicy(t, path, "# same\n"+denyAll, base.Add(4*time.Minute))
	// A removed file keeps the policy.
	time.Sleep(30 * time.Millisecond)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.err == nil {
		t.Fatalf("removed file: %+v", ev)
	}
	if e.Decide(req).RuleID != "none" {
		t.Fatal("policy lost with the file")
	}
	select {
	case ev := <-events:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}
