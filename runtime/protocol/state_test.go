package protocol

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestSealer(t *testing.T, c *clock) *Sealer {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSealer(key, SealerOptions{TTL: time.Minute, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealOpen(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, c)
	in := State{Upstream: "everything", Target: "everything:ask#00000000", ArgsHash: strings.Repeat("a", 64),
		Principal: "jwt:ci:alice", UpstreamState: "opaque", InputIDs: []string{"q1"}, Round: 1}
	sealed, err := s.Seal(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "alice") || strings.ContainsAny(sealed, "+/= ") {
		t.Fatalf("sealed state is not opaque base64url: %q", sealed)
	}
	out, err := s.Open(context.Background(), sealed, "jwt:ci:alice")
	if err != nil {
		t.Fatal(err)
	}
	if out.Upstream != in.Upstream || out.Target != in.Target || out.UpstreamState != in.UpstreamState || out.Round != 1 || len(out.InputIDs) != 1 {
		t.Fatalf("opened %+v", out)
	}
	// A state opens once.
	if _, err := s.Open(context.Background(), sealed, "jwt:ci:alice"); !errors.Is(err, ErrStateReplayed) {
		t.Fatalf("replay: %v", err)
	}
}

// Every way a client can spoil a state is refused with its own error.
func TestOpenRefusals(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, c)
	other := newTestSealer(t, c)
	seal := func(s *Sealer) string {
		t.Helper()
		x, err := s.Seal(State{Upstream: "u", Target: "t", Principal: "p"})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	flip := func(x string, i int) string {
		b := []byte(x)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	good := seal(s)
	dot := strings.IndexByte(good, '.')
	cases := []struct {
		name, sealed, principal string
		want                    error
	}{
		{"empty", "", "p", ErrStateInvalid},
		{"no seal", good[:dot], "p", ErrStateInvalid},
		{"body changed", flip(good, 3), "p", ErrStateInvalid},
		{"seal changed", flip(good, len(good)-2), "p", ErrStateInvalid},
		{"other key", seal(other), "p", ErrStateInvalid},
		{"oversized", strings.Repeat("A", MaxSealedState+1), "p", ErrStateInvalid},
		{"not base64", "!!!." + good[dot+1:], "p", ErrStateInvalid},
		{"foreign principal", seal(s), "q", ErrStateForeign},
	}
	for _, tc := range cases {
		if _, err := s.Open(context.Background(), tc.sealed, tc.principal); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	late := seal(s)
	c.t = c.t.Add(time.Minute)
	if _, err := s.Open(context.Background(), late, "p"); !errors.Is(err, ErrStateExpired) {
		t.Errorf("expired: %v", err)
	}
	// A refused state is not redeemed: the right caller can still use it
	// in time.
	c.t = c.t.Add(-30 * time.Second)
	foreign := seal(s)
	if _, err := s.Open(context.Background(), foreign, "q"); !errors.Is(err, ErrStateForeign) {
		t.Fatal(err)
	}
	if _, err := s.Open(context.Background(), foreign, "p"); err != nil {
		t.Fatalf("after a foreign attempt: %v", err)
	}
}

func TestNewSealerKey(t *testing.T) {
	if _, err := NewSealer(make([]byte, 16), SealerOptions{}); err == nil {
		t.Fatal("a short key was accepted")
	}
}

// The redeemed cache stays bounded and still refuses recent replays.
func TestRedeemedCacheBounded(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	r := NewRedeemedCache(100, c.now)
	for i := range 1000 {
		if ok, _ := r.Redeem(context.Background(), string(rune(0x4e00+i)), c.t.Add(time.Duration(i)*time.Second)); !ok {
			t.Fatalf("nonce %d refused", i)
		}
	}
	if len(r.until) > 100 {
		t.Fatalf("%d nonces kept", len(r.until))
	}
	if ok, _ := r.Redeem(context.Background(), string(rune(0x4e00+999)), c.t.Add(time.Hour)); ok {
		t.Fatal("the newest nonce was forgotten")
	}
}

// Open reads a state that came through a client: whatever it is, it is
// refused or opened, never a panic, and only a real seal opens.
func FuzzOpen(f *testing.F) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	key := make([]byte, KeySize)
	s, err := NewSealer(key, SealerOptions{Now: c.now})
	if err != nil {
		f.Fatal(err)
	}
	good, err := s.Seal(State{Upstream: "u", Target: "t", Principal: "p"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add("e30.AAAA")
	f.Fuzz(func(t *testing.T, sealed string) {
		st, err := s.Open(context.Background(), sealed, "p")
		if err == nil && (st.Nonce == "" || st.Principal != "p") {
			t.Fatalf("opened %+v", st)
		}
	})
}

// TestKVRedeemed: two sealers with one key on one KV are two replicas: a
// state redeemed on one does not open on the other, and a KV that cannot
// be reached opens nothing.
func TestKVRedeemed(t *testing.T) {
	ctx := context.Background()
	key, _ := NewKey()
	kv := statetest.NewFailing(state.NewMemory(nil))
	a, _ := NewSealer(key, SealerOptions{Redeemed: KVRedeemed{KV: kv}})
	b, _ := NewSealer(key, SealerOptions{Redeemed: KVRedeemed{KV: kv}})
	sealed, err := a.Seal(State{Principal: "p", Upstream: "u"})
	if err != nil {
		t.Fatal(err)
	}
	kv.SetDown(true)
	if _, err := b.Open(ctx, sealed, "p"); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("open with the KV down: %v", err)
	}
	kv.SetDown(false)
	if _, err := b.Open(ctx, sealed, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(ctx, sealed, "p"); !errors.Is(err, ErrStateReplayed) {
		t.Fatalf("replayed on the other replica: %v", err)
	}
}
