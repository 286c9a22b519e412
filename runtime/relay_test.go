package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// relayClient is an upstream client that never runs: the relay only uses
// its identity and name.
func relayClient(name string) *upstream.Client {
	return upstream.New(upstream.Spec{Name: name, Command: []string{"x"}}, upstream.Options{})
}

// serverSessions returns n distinct downstream sessions of an in-memory
// go-sdk server, each with a connected client.
func serverSessions(t *testing.T, n int) []*mcp.ServerSession {
	t.Helper()
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "relay-test", Version: "1"}, nil)
	var out []*mcp.ServerSession
	for i := range n {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("c%d", i), Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.Close()
			_ = ss.Close()
		})
		out = append(out, ss)
	}
	return out
}

// callCtx is the context of a downstream request of session ss with
// progress token tok (nil: none).
func callCtx(ss *mcp.ServerSession, tok any) context.Context {
	return withCaller(context.Background(), &caller{ss: ss, progress: tok})
}

func wantRelayCode(t *testing.T, f *flight, err *relayError, code string) {
	t.Helper()
	if err == nil || err.code != code {
		t.Fatalf("target = %+v, %v; want %s", f, err, code)
	}
	if f != nil {
		t.Fatalf("target returned a flight %+v with error %v", f, err)
	}
	if !strings.HasPrefix(err.Error(), "quiver: "+code+": ") {
		t.Errorf("error text %q", err.Error())
	}
}

func TestRelayTarget(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 2)
	a, b := ss[0], ss[1]
	if a == b {
		t.Fatal("sessions are not distinct")
	}
	bg := context.Background()

	t.Run("no flight", func(t *testing.T) {
		rl, uc := newRelay(), relayClient("u")
		f, err := rl.target(bg, uc)
		wantRelayCode(t, f, err, CodeRelayNoCaller)
		if !strings.Contains(err.Error(), `"u"`) {
			t.Errorf("error %q does not name the upstream", err)
		}
	})

	t.Run("one flight", func(t *testing.T) {
		rl, uc := newRelay(), relayClient("u")
		_, _, done := rl.begin(callCtx(a, nil), uc, "srv", "srv:tool")
		defer done()
		f, err := rl.target(bg, uc)
		if err != nil || f == nil {
			t.Fatalf("target = %v, %v", f, err)
		}
		if f.session() != a || f.server != "srv" || f.toolID != "srv:tool" {
			t.Fatalf("flight %+v", f)
		}
	})

	t.Run("two flights of one session: the session", func(t *testing.T) {
		rl, uc := newRelay(), relayClient("u")
		_, _, done1 := rl.begin(callCtx(a, nil), uc, "srv", "srv:first")
		defer done1()
		_, _, done2 := rl.begin(callCtx(a, nil), uc, "srv", "srv:second")
		// Neither call in particular: a flight that stands for the
		// session, on the relay's base context, with no tool and no end.
		f, err := rl.target(bg, uc)
		if err != nil || f.session() != a || f.toolID != "" || f.server != "srv" || f.fcancel != nil || !f.enter() {
			t.Fatalf("target = %+v, %v; want the session's flight", f, err)
		}
		f.leave(false)
		if callerOf(f.ctx) == nil {
			t.Fatal("the session's flight carries no caller")
		}
		// Once the newest ends, the older one is the target.
		done2()
		f, err = rl.target(bg, uc)
		if err != nil || f.toolID != "srv:first" {
			t.Fatalf("after the second ended, target = %+v, %v; want the first", f, err)
		}
	})

	t.Run("two flights of different sessions: ambiguous", func(t *testing.T) {
		rl, uc := newRelay(), relayClient("u")
		_, _, doneA := rl.begin(callCtx(a, nil), uc, "srv", "srv:a")
		_, _, doneB := rl.begin(callCtx(b, nil), uc, "srv", "srv:b")
		defer doneA()
		for range 20 { // map iteration order varies
			f, err := rl.target(bg, uc)
			wantRelayCode(t, f, err, CodeRelayAmbiguous)
		}
		// When one of them ends, the other is unambiguous again.
		doneB()
		f, err := rl.target(bg, uc)
		if err != nil || f.session() != a {
			t.Fatalf("after b ended, target = %+v, %v", f, err)
		}
	})

	t.Run("a flight without a caller is a session of its own", func(t *testing.T) {
		rl, uc := newRelay(), relayClient("u")
		_, _, done1 := rl.begin(bg, uc, "srv", "srv:x")
		defer done1()
		_, _, done2 := rl.begin(bg, uc, "srv", "srv:y")
		defer done2()
		f, err := rl.target(bg, uc)
		if err != nil || f.toolID != "" || f.session() != nil {
			t.Fatalf("two caller-less flights: target = %+v, %v", f, err)
		}
		_, _, done3 := rl.begin(callCtx(a, nil), uc, "srv", "srv:z")
		defer done3()
		f, err = rl.target(bg, uc)
		wantRelayCode(t, f, err, CodeRelayAmbiguous)
	})

	t.Run("the handler's flight wins", func(t *testing.T) {
		rl, uc := newRelay(), relayClient("u")
		ctxA, _, doneA := rl.begin(callCtx(a, nil), uc, "srv", "srv:a")
		defer doneA()
		_, _, doneB := rl.begin(callCtx(b, nil), uc, "srv", "srv:b")
		defer doneB()
		// Shared: ambiguous; on the call's own context: exact.
		if _, err := rl.target(bg, uc); err == nil || err.code != CodeRelayAmbiguous {
			t.Fatalf("without the flight in the context: %v", err)
		}
		f, err := rl.target(ctxA, uc)
		if err != nil || f.session() != a || f.toolID != "srv:a" {
			t.Fatalf("target(ctxA) = %+v, %v", f, err)
		}
		// Even for another upstream client, and after the flight ended:
		// the context names it.
		f, err = rl.target(ctxA, relayClient("other"))
		if err != nil || f.toolID != "srv:a" {
			t.Fatalf("target(ctxA, other) = %+v, %v", f, err)
		}
	})

	t.Run("owner when no call is in flight", func(t *testing.T) {
		rl, uc := newRelay(), relayClient("u")
		owner := &flight{ctx: callCtx(b, nil), c: &caller{ss: b}}
		rl.own(uc, owner)
		f, err := rl.target(bg, uc)
		if err != nil || f != owner {
			t.Fatalf("owned, idle: target = %+v, %v; want the owner", f, err)
		}
		// A call in flight takes precedence over the owner.
		_, _, done := rl.begin(callCtx(a, nil), uc, "srv", "srv:a")
		f, err = rl.target(bg, uc)
		if err != nil || f.toolID != "srv:a" {
			t.Fatalf("owned, busy: target = %+v, %v; want the call", f, err)
		}
		done()
		if f, _ := rl.target(bg, uc); f != owner {
			t.Fatalf("after the call: target = %+v; want the owner", f)
		}
		// Another client's owner does not apply.
		if f, err := rl.target(bg, relayClient("u")); err == nil || err.code != CodeRelayNoCaller {
			t.Fatalf("another client: %+v, %v", f, err)
		}
		rl.disown(uc)
		f, err = rl.target(bg, uc)
		wantRelayCode(t, f, err, CodeRelayNoCaller)
	})

	t.Run("flights of other clients do not count", func(t *testing.T) {
		rl, u1, u2 := newRelay(), relayClient("u"), relayClient("u")
		_, _, done1 := rl.begin(callCtx(a, nil), u1, "srv", "srv:a")
		defer done1()
		_, _, done2 := rl.begin(callCtx(b, nil), u2, "srv", "srv:b")
		defer done2()
		if f, err := rl.target(bg, u1); err != nil || f.session() != a {
			t.Fatalf("u1: %+v, %v", f, err)
		}
		if f, err := rl.target(bg, u2); err != nil || f.session() != b {
			t.Fatalf("u2: %+v, %v", f, err)
		}
	})
}

func TestRelayProgressTokens(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 1)
	rl, uc := newRelay(), relayClient("u")

	// No progress token: none upstream either.
	_, up, done := rl.begin(callCtx(ss[0], nil), uc, "srv", "srv:t")
	if up != "" {
		t.Errorf("upstream token %q for a call without one", up)
	}
	done()
	_, up, done = rl.begin(context.Background(), uc, "srv", "srv:t")
	if up != "" {
		t.Errorf("upstream token %q for a call without a caller", up)
	}
	done()

	// Tokens of both JSON types map back to the downstream token.
	downs := []any{"down-1", float64(42), int64(7)}
	ups := map[string]bool{}
	var dones []func()
	for _, down := range downs {
		ctx, up, done := rl.begin(callCtx(ss[0], down), uc, "srv", "srv:t")
		dones = append(dones, done)
		if up == "" || ups[up] {
			t.Fatalf("upstream token %q (seen: %v)", up, ups)
		}
		ups[up] = true
		f := rl.byToken(up)
		if f == nil || f.token != down || f.upToken != up {
			t.Fatalf("byToken(%q) = %+v, want downstream token %v", up, f, down)
		}
		if hf, _ := ctx.Value(flightKey{}).(*flight); hf != f {
			t.Fatalf("the returned context carries %+v, want %+v", hf, f)
		}
	}
	// Tokens that are not the relay's own find nothing.
	for _, tok := range []any{nil, "", "down-1", "quiver-999999", 1, float64(1), []byte("quiver-1")} {
		if f := rl.byToken(tok); f != nil {
			t.Errorf("byToken(%v) = %+v, want nil", tok, f)
		}
	}
	// done removes the flight and its token.
	for i, done := range dones {
		done()
		n := 0
		for up := range ups {
			if rl.byToken(up) != nil {
				n++
			}
		}
		if want := len(dones) - i - 1; n != want {
			t.Fatalf("after %d done: %d tokens resolve, want %d", i+1, n, want)
		}
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.flights) != 0 || len(rl.tokens) != 0 {
		t.Fatalf("after every done: flights %v tokens %v", rl.flights, rl.tokens)
	}
}

func TestRelayDoneIsIdempotent(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 1)
	rl, uc := newRelay(), relayClient("u")
	_, up1, done1 := rl.begin(callCtx(ss[0], "a"), uc, "srv", "srv:1")
	_, up2, done2 := rl.begin(callCtx(ss[0], "b"), uc, "srv", "srv:2")
	done1()
	done1() // a second call must not remove anything else
	if rl.byToken(up1) != nil || rl.byToken(up2) == nil {
		t.Fatalf("after done1 twice: %v %v", rl.byToken(up1), rl.byToken(up2))
	}
	if f, err := rl.target(context.Background(), uc); err != nil || f.toolID != "srv:2" {
		t.Fatalf("target = %+v, %v", f, err)
	}
	done2()
	if f, err := rl.target(context.Background(), uc); err == nil {
		t.Fatalf("target after both done = %+v", f)
	}
}

// TestRelayConcurrent exercises the relay from many goroutines (run with
// -race).
func TestRelayConcurrent(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 1)
	rl := newRelay()
	ucs := []*upstream.Client{relayClient("a"), relayClient("b")}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				uc := ucs[(g+i)%2]
				ctx, up, done := rl.begin(callCtx(ss[0], fmt.Sprintf("t-%d-%d", g, i)), uc, "srv", "srv:t")
				if f := rl.byToken(up); f == nil || f.token != fmt.Sprintf("t-%d-%d", g, i) {
					t.Errorf("byToken(%q) = %+v", up, f)
				}
				if f, err := rl.target(ctx, uc); err != nil || f.upToken != up {
					t.Errorf("target(own ctx) = %+v, %v", f, err)
				}
				// One session: never ambiguous.
				if _, err := rl.target(context.Background(), uc); err != nil {
					t.Errorf("target = %v", err)
				}
				done()
			}
		})
	}
	wg.Wait()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.flights) != 0 || len(rl.tokens) != 0 {
		t.Fatalf("leftovers: flights %d tokens %d", len(rl.flights), len(rl.tokens))
	}
}

// A call that ends cancels the requests still forwarded for it and waits
// for them to unwind before it answers; a late request is refused.
func TestFlightEndUnwindsForwards(t *testing.T) {
	rl, uc := newRelay(), relayClient("u")
	_, _, done := rl.begin(context.Background(), uc, "srv", "srv:tool")
	f, rerr := rl.target(context.Background(), uc)
	if rerr != nil || !f.enter() {
		t.Fatalf("target %v, %v", f, rerr)
	}
	fctx := f.forwardCtx()
	ended := make(chan struct{})
	go func() {
		done()
		close(ended)
	}()
	select {
	case <-fctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the forwarded request was not cancelled when its call ended")
	}
	select {
	case <-ended:
		t.Fatal("the call ended before its forwarded request unwound")
	case <-time.After(20 * time.Millisecond):
	}
	f.leave(false)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end after its forwarded request unwound")
	}
	if f.enter() {
		t.Fatal("a request was forwarded for a call that has ended")
	}
}
