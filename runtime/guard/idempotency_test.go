package guard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

func openMem(t *testing.T) *IdempotencyStore {
	t.Helper()
	s, err := NewIdempotency(IdempotencyOptions{KV: state.NewMemory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFingerprint(t *testing.T) {
	a, _ := Fingerprint("s", "t", map[string]any{"a": 1.0, "b": "x"})
	b, _ := Fingerprint("s", "t", map[string]any{"b": "x", "a": 1.0})
	c, _ := Fingerprint("s", "t", map[string]any{"a": 2.0, "b": "x"})
	d, _ := Fingerprint("s", "u", map[string]any{"a": 1.0, "b": "x"})
	e, _ := Fingerprint("st", "", map[string]any{"a": 1.0, "b": "x"})
	if a != b {
		t.Fatal("key order changed the fingerprint")
	}
	if a == c || a == d || d == e {
		t.Fatal("different calls share a fingerprint")
	}
}

func TestIdempotencyLifecycle(t *testing.T) {
	ctx := context.Background()
	s := openMem(t)
	type step struct {
		name      string
		principal string
		key, fp   string
		code      string // refusal expected
		replay    string // payload expected
		then      func(r *Reservation)
	}
	var steps []step
	complete := func(payload string) func(*Reservation) {
		return func(r *Reservation) {
			if err := s.Complete(ctx, r, []byte(payload)); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps = append(steps,
		step{name: "fresh", principal: "p", key: "k1", fp: "f1"},
		step{name: "running", principal: "p", key: "k1", fp: "f1", code: codes.IdempotencyKeyInProgress},
		step{name: "running, other args", principal: "p", key: "k1", fp: "f2", code: codes.IdempotencyKeyReused},
		step{name: "other principal", principal: "q", key: "k1", fp: "f1", then: complete(`{"q":1}`)},
		step{name: "k2 fresh", principal: "p", key: "k2", fp: "f1", then: complete(`{"ok":1}`)},
		step{name: "k2 replay", principal: "p", key: "k2", fp: "f1", replay: `{"ok":1}`},
		step{name: "k2 reused", principal: "p", key: "k2", fp: "f9", code: codes.IdempotencyKeyReused},
		step{name: "k3 fresh", principal: "p", key: "k3", fp: "f1", then: func(r *Reservation) {
			if err := s.Abandon(ctx, r, "UPSTREAM_TIMEOUT"); err != nil {
				t.Fatal(err)
			}
		}},
		step{name: "k3 unknown", principal: "p", key: "k3", fp: "f1", code: codes.IdempotencyOutcomeUnknown},
		step{name: "k4 fresh", principal: "p", key: "k4", fp: "f1", then: func(r *Reservation) {
			if err := s.Release(ctx, r); err != nil {
				t.Fatal(err)
			}
		}},
		step{name: "k4 free again", principal: "p", key: "k4", fp: "f2"},
	)
	for _, st := range steps {
		r, refusal, err := s.Begin(ctx, st.principal, st.key, st.fp)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		switch {
		case st.code != "":
			if refusal == nil || refusal.Code != st.code {
				t.Fatalf("%s: refusal %v, want %s", st.name, refusal, st.code)
			}
			if (st.code == codes.IdempotencyKeyInProgress) != refusal.Retryable {
				t.Fatalf("%s: retryable %v", st.name, refusal.Retryable)
			}
			continue
		case refusal != nil:
			t.Fatalf("%s: refused %v", st.name, refusal)
		case st.replay != "":
			if string(r.Replay) != st.replay {
				t.Fatalf("%s: replay %s", st.name, r.Replay)
			}
		case r.Replay != nil:
			t.Fatalf("%s: unexpected replay %s", st.name, r.Replay)
		}
		if st.then != nil {
			st.then(r)
		}
	}
	// Peek tells without reserving.
	if replay, refusal, err := s.Peek(ctx, "p", "k2", "f1"); err != nil || refusal != nil || !replay {
		t.Fatalf("peek k2: %v %v %v", replay, refusal, err)
	}
	if replay, refusal, err := s.Peek(ctx, "p", "k5", "f1"); err != nil || refusal != nil || replay {
		t.Fatalf("peek k5: %v %v %v", replay, refusal, err)
	}
	if r, refusal, _ := s.Begin(ctx, "p", "k5", "f1"); refusal != nil || r.Replay != nil {
		t.Fatal("peek reserved k5")
	}
}

// TestIdempotencyConcurrent: of 64 simultaneous calls with one key,
// spread over 4 stores on one KV (4 processes), exactly one gets the
// reservation.
func TestIdempotencyConcurrent(t *testing.T) {
	kv := state.NewMemory(nil)
	stores := make([]*IdempotencyStore, 4)
	for i := range stores {
		stores[i], _ = NewIdempotency(IdempotencyOptions{KV: kv})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for i := 0; i < 64; i++ {
		wg.Add(1)
		s := stores[i%len(stores)]
		go func() {
			defer wg.Done()
			r, refusal, err := s.Begin(context.Background(), "p", "k", "f")
			if err != nil {
				t.Error(err)
				return
			}
			if refusal == nil && r.Replay == nil {
				mu.Lock()
				fresh++
				mu.Unlock()
			} else if refusal != nil && refusal.Code != codes.IdempotencyKeyInProgress {
				t.Errorf("refusal %v", refusal)
			}
		}()
	}
	wg.Wait()
	if fresh != 1 {
		t.Fatalf("%d reservations", fresh)
	}
}

// TestIdempotencyShared: a record made through one store is seen by
// another on the same KV (another process): replayed when finished, in
// progress while pending, and a finish whose record vanished is reported.
func TestIdempotencyShared(t *testing.T) {
	ctx := context.Background()
	kv := state.NewMemory(nil)
	a, _ := NewIdempotency(IdempotencyOptions{KV: kv})
	b, _ := NewIdempotency(IdempotencyOptions{KV: kv})
	done, _, _ := a.Begin(ctx, "p", "done", "f")
	if err := a.Complete(ctx, done, []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	r, refusal, err := b.Begin(ctx, "p", "done", "f")
	if err != nil || refusal != nil || string(r.Replay) != `{"x":1}` {
		t.Fatalf("replay through b: %v %v %v", r, refusal, err)
	}
	pending, refusal, _ := a.Begin(ctx, "p", "pending", "f")
	if refusal != nil {
		t.Fatal(refusal)
	}
	if _, refusal, _ := b.Begin(ctx, "p", "pending", "f"); refusal == nil || refusal.Code != codes.IdempotencyKeyInProgress {
		t.Fatalf("pending in a: %v", refusal)
	}
	if err := kv.Delete(ctx, recordKey("p", "pending")); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, pending, []byte(`{}`)); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("complete of a lost reservation: %v", err)
	}
	if err := a.Complete(ctx, r, []byte(`{}`)); err == nil {
		t.Fatal("completed a replay")
	}
}

// TestIdempotencyStalePending: a reservation still pending after the
// pending timeout was left by a process that died mid-call: its outcome is
// unknown, and it is never dispatched again.
func TestIdempotencyStalePending(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	s, _ := NewIdempotency(IdempotencyOptions{KV: state.NewMemory(clock), PendingTimeout: time.Minute, Now: clock})
	if _, refusal, _ := s.Begin(ctx, "p", "k", "f"); refusal != nil {
		t.Fatal(refusal)
	}
	if _, refusal, _ := s.Begin(ctx, "p", "k", "f"); refusal == nil || refusal.Code != codes.IdempotencyKeyInProgress {
		t.Fatalf("within the timeout: %v", refusal)
	}
	now = now.Add(2 * time.Minute)
	if _, refusal, _ := s.Begin(ctx, "p", "k", "f"); refusal == nil || refusal.Code != codes.IdempotencyOutcomeUnknown {
		t.Fatalf("past the timeout: %v", refusal)
	}
}

// TestIdempotencyUnavailable: a store that cannot be reached reserves
// nothing and says so with state.ErrUnavailable.
func TestIdempotencyUnavailable(t *testing.T) {
	ctx := context.Background()
	kv := statetest.NewFailing(state.NewMemory(nil))
	s, _ := NewIdempotency(IdempotencyOptions{KV: kv})
	r, _, _ := s.Begin(ctx, "p", "k", "f")
	kv.SetDown(true)
	for name, err := range map[string]error{
		"begin":    second(s.Begin(ctx, "p", "k2", "f")),
		"peek":     func() error { _, _, err := s.Peek(ctx, "p", "k", "f"); return err }(),
		"complete": s.Complete(ctx, r, []byte(`{}`)),
	} {
		if !errors.Is(err, state.ErrUnavailable) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewIdempotency(IdempotencyOptions{}); err == nil {
		t.Fatal("made a store without a KV")
	}
}

func second(_ *Reservation, _ *Error, err error) error { return err }
