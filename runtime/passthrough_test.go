//lint:file-ignore SA1019 logging is deprecated in protocol 2026-07-28 only; quiver forwards it for the protocols that have it.

package runtime

import (
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestLogLevelsSet(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 2)
	a, b := ss[0], ss[1]
	var l logLevels // the zero value is ready to use

	if got := l.of(a); got != "" {
		t.Fatalf("of(a) before any set = %q", got)
	}
	if got := l.sharedLevel("u1"); got != "" {
		t.Fatalf("sharedLevel before any set = %q", got)
	}
	steps := []struct {
		ss        *mcp.ServerSession
		lvl       mcp.LoggingLevel
		names     []string
		wantLower []string
		wantShare map[string]mcp.LoggingLevel
	}{
		// The first level set on a shared session is sent whatever it is.
		{a, "warning", []string{"u1", "u2"}, []string{"u1", "u2"}, map[string]mcp.LoggingLevel{"u1": "warning", "u2": "warning"}},
		// Less verbose: nothing is lowered.
		{b, "error", []string{"u1", "u2"}, nil, map[string]mcp.LoggingLevel{"u1": "warning", "u2": "warning"}},
		// The same level: nothing to send.
		{b, "warning", []string{"u1", "u2"}, nil, map[string]mcp.LoggingLevel{"u1": "warning", "u2": "warning"}},
		// More verbose: lowered.
		{b, "info", []string{"u1", "u2"}, []string{"u1", "u2"}, map[string]mcp.LoggingLevel{"u1": "info", "u2": "info"}},
		// A new upstream gets its first level; the others stay.
		{a, "error", []string{"u1", "u2", "u3"}, []string{"u3"}, map[string]mcp.LoggingLevel{"u1": "info", "u2": "info", "u3": "error"}},
		// Only the names given are considered.
		{a, "debug", []string{"u3"}, []string{"u3"}, map[string]mcp.LoggingLevel{"u1": "info", "u2": "info", "u3": "debug"}},
		{b, "debug", []string{"u1", "u2", "u3"}, []string{"u1", "u2"}, map[string]mcp.LoggingLevel{"u1": "debug", "u2": "debug", "u3": "debug"}},
		// Nothing is more verbose than debug; a shared level never rises.
		{a, "emergency", []string{"u1", "u2", "u3"}, nil, map[string]mcp.LoggingLevel{"u1": "debug", "u2": "debug", "u3": "debug"}},
		// No upstreams.
		{b, "critical", nil, nil, map[string]mcp.LoggingLevel{"u1": "debug", "u2": "debug", "u3": "debug"}},
	}
	for i, s := range steps {
		got := l.set(s.ss, s.lvl, s.names)
		sort.Strings(got)
		if !slices.Equal(got, s.wantLower) {
			t.Fatalf("step %d: set(%q, %v) lowers %v, want %v", i, s.lvl, s.names, got, s.wantLower)
		}
		if l.of(s.ss) != s.lvl {
			t.Fatalf("step %d: of(session) = %q, want %q", i, l.of(s.ss), s.lvl)
		}
		for n, want := range s.wantShare {
			if got := l.sharedLevel(n); got != want {
				t.Fatalf("step %d: sharedLevel(%s) = %q, want %q", i, n, got, want)
			}
		}
	}
	// Per session: each remembers its own last level.
	if l.of(a) != "emergency" || l.of(b) != "critical" {
		t.Fatalf("of(a) = %q, of(b) = %q", l.of(a), l.of(b))
	}
	// forget drops one session only, and leaves the shared levels.
	l.forget(a)
	if l.of(a) != "" || l.of(b) != "critical" {
		t.Fatalf("after forget(a): of(a) = %q, of(b) = %q", l.of(a), l.of(b))
	}
	if l.sharedLevel("u1") != "debug" {
		t.Fatalf("forget changed a shared level: %q", l.sharedLevel("u1"))
	}
	l.forget(a) // twice is harmless
	var zero logLevels
	zero.forget(a) // so is forgetting on a zero value

	// A nil session (no downstream session to remember) still sets the
	// shared levels.
	var n logLevels
	if got := n.set(nil, "notice", []string{"u"}); !slices.Equal(got, []string{"u"}) {
		t.Fatalf("set(nil) lowers %v", got)
	}
	if n.of(nil) != "" || len(n.session) != 0 {
		t.Fatalf("a nil session was remembered: %v", n.session)
	}
}

func TestLogLevelsRankEveryPair(t *testing.T) {
	t.Parallel()
	levels := []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
	if len(levelRank) != len(levels) {
		t.Fatalf("levelRank has %d levels, want %d", len(levelRank), len(levels))
	}
	for i, first := range levels {
		for j, second := range levels {
			var l logLevels
			l.set(nil, first, []string{"u"})
			lower := l.set(nil, second, []string{"u"})
			if wantLower := j < i; (len(lower) == 1) != wantLower {
				t.Errorf("%s then %s: lowered %v, want %v", first, second, lower, wantLower)
			}
			want := first
			if j < i {
				want = second
			}
			if got := l.sharedLevel("u"); got != want {
				t.Errorf("%s then %s: shared %s, want %s", first, second, got, want)
			}
		}
	}
}

func TestLogLevelsConcurrent(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 4)
	var l logLevels
	var wg sync.WaitGroup
	levels := []mcp.LoggingLevel{"emergency", "error", "info", "debug"}
	for i, s := range ss {
		wg.Go(func() {
			for range 100 {
				l.set(s, levels[i], []string{"u1", "u2"})
				_ = l.of(s)
				_ = l.sharedLevel("u1")
			}
			l.forget(s)
		})
	}
	wg.Wait()
	if l.sharedLevel("u1") != "debug" || l.sharedLevel("u2") != "debug" {
		t.Fatalf("shared levels %q %q, want the most verbose asked for", l.sharedLevel("u1"), l.sharedLevel("u2"))
	}
	if len(l.session) != 0 {
		t.Fatalf("sessions left after forget: %v", l.session)
	}
}

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 3)
	a, b, c := ss[0], ss[1], ss[2]
	var s subscriptions // the zero value is ready to use

	if got := s.of("u"); len(got) != 0 {
		t.Fatalf("of before any add = %v", got)
	}
	if s.remove("u", "x://1", a) {
		t.Fatal("remove before any add reported the last subscriber")
	}
	if got := s.drop(a); len(got) != 0 {
		t.Fatalf("drop before any add = %v", got)
	}

	// The first subscriber of an (upstream, URI) pair is first; later ones
	// and repeats are not.
	if !s.add("u", "x://1", a) {
		t.Fatal("first add not first")
	}
	if s.add("u", "x://1", a) {
		t.Fatal("repeated add of the same session reported first")
	}
	if s.add("u", "x://1", b) {
		t.Fatal("second session reported first")
	}
	// Other URIs and other upstreams are counted apart.
	if !s.add("u", "x://2", b) || !s.add("v", "x://1", a) {
		t.Fatal("another URI or upstream not first")
	}
	sorted := func(v []string) []string { sort.Strings(v); return v }
	if got := sorted(s.of("u")); !slices.Equal(got, []string{"x://1", "x://2"}) {
		t.Fatalf("of(u) = %v", got)
	}
	if got := s.of("v"); !slices.Equal(got, []string{"x://1"}) {
		t.Fatalf("of(v) = %v", got)
	}
	if got := s.of("w"); len(got) != 0 {
		t.Fatalf("of(w) = %v", got)
	}

	// remove: only a subscriber's removal counts, and the last one is last.
	if s.remove("u", "x://1", c) {
		t.Fatal("removing a session that never subscribed reported last")
	}
	if s.remove("u", "x://1", a) {
		t.Fatal("removing one of two subscribers reported last")
	}
	if s.remove("u", "x://1", a) {
		t.Fatal("removing the same session twice reported last")
	}
	if !s.remove("u", "x://1", b) {
		t.Fatal("removing the last subscriber not reported last")
	}
	if got := s.of("u"); !slices.Equal(got, []string{"x://2"}) {
		t.Fatalf("of(u) after the last left = %v", got)
	}
	// Subscribing again after the last left is first again.
	if !s.add("u", "x://1", c) {
		t.Fatal("re-subscribing after the last left not first")
	}

	// drop: a session's end releases the pairs nobody else holds.
	s.add("u", "x://2", a) // x://2 held by b and a
	s.add("u", "x://3", a) // held by a alone
	gone := s.drop(a)
	var keys []string
	for _, k := range gone {
		keys = append(keys, k[0]+" "+k[1])
	}
	sort.Strings(keys)
	if want := []string{"u x://3", "v x://1"}; !slices.Equal(keys, want) {
		t.Fatalf("drop(a) = %v, want %v", keys, want)
	}
	if got := sorted(s.of("u")); !slices.Equal(got, []string{"x://1", "x://2"}) {
		t.Fatalf("of(u) after drop(a) = %v", got)
	}
	if got := s.of("v"); len(got) != 0 {
		t.Fatalf("of(v) after drop(a) = %v", got)
	}
	if got := s.drop(a); len(got) != 0 {
		t.Fatalf("second drop(a) = %v", got)
	}
	if !s.remove("u", "x://2", b) {
		t.Fatal("b was the last subscriber of x://2")
	}
}

func TestSubscriptionsConcurrent(t *testing.T) {
	t.Parallel()
	ss := serverSessions(t, 4)
	var s subscriptions
	var mu sync.Mutex
	firsts, lasts := 0, 0
	var wg sync.WaitGroup
	for _, x := range ss {
		wg.Go(func() {
			for range 100 {
				f := s.add("u", "x://1", x)
				l := s.remove("u", "x://1", x)
				mu.Lock()
				if f {
					firsts++
				}
				if l {
					lasts++
				}
				mu.Unlock()
				_ = s.of("u")
			}
		})
	}
	wg.Wait()
	// Every first subscription is matched by one last unsubscription.
	if firsts != lasts || firsts == 0 {
		t.Fatalf("firsts %d, lasts %d", firsts, lasts)
	}
	if got := s.of("u"); len(got) != 0 {
		t.Fatalf("left subscribed: %v", got)
	}
}
