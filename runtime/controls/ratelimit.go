package controls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
)

// Window is the sliding window of per-minute limits.
const Window = 60 * time.Second

// MaxSessions bounds the sessions whose counts are kept at once; the least
// recently seen session's counts are dropped first.
const MaxSessions = 4096

// Limit is one scope's limits; 0 means unlimited.
type Limit struct {
	PerMinute  int
	PerSession int
}

// Denial says which limit refused a call.
type Denial struct {
	// Scope is the configured scope ("tool_execute", "tool:github:*").
	Scope string
	// Limit is "max_calls_per_minute" or "max_calls_per_session".
	Limit string
	// RetryAfter is when the window admits a call again (0 for a session
	// cap, which never resets within the session).
	RetryAfter time.Duration
	// Err, when set, is why the shared windows could not be asked
	// (wrapping state.ErrUnavailable among others): the call is refused
	// all the same, because a limiter that cannot count fails closed.
	Err error
}

// scope is one configured limit: a meta-tool name or "tool:" + a tool_id
// glob.
type scope struct {
	name  string
	meta  string // meta-tool name, or ""
	glob  string // tool_id glob, for tool: scopes
	limit Limit
}

// RateLimiter enforces limits per meta-tool and per tool_id glob (spec 003
// §4.5). Each scope counts every call it matches: a tool:<glob> scope
// counts the calls of all the tools it matches together.
//
// Per-minute limits are one sliding window per principal and scope in a
// state.KV (KV.Admit), so every process sharing the KV shares them: N
// replicas admit at most the limit together. Per-session caps count in
// this process's memory, per session (a session lives in one process).
// Safe for concurrent use.
type RateLimiter struct {
	scopes []scope
	kv     state.KV
	now    func() time.Time

	mu       sync.Mutex
	sessions map[any]*sessionCounts
	tick     uint64
}

type sessionCounts struct {
	seen   uint64         // tick of the last use, for eviction
	scopes map[string]int // calls counted per scope
}

// NewRateLimiter returns a limiter for limits keyed by scope: a meta-tool
// name (tool_browse, tool_hydrate, tool_execute, tool_view) or
// "tool:<tool_id glob>" (path.Match syntax). kv keeps the per-minute
// windows (an in-process state.NewMemory when nil: not shared); now is the
// clock (time.Now when nil). Nil is returned for no limits: a nil
// *RateLimiter admits everything.
func NewRateLimiter(limits map[string]Limit, kv state.KV, now func() time.Time) *RateLimiter {
	if len(limits) == 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	if kv == nil {
		kv = state.NewMemory(now)
	}
	l := &RateLimiter{kv: kv, now: now, sessions: map[any]*sessionCounts{}}
	for name, lim := range limits {
		if lim.PerMinute <= 0 && lim.PerSession <= 0 {
			continue
		}
		s := scope{name: name, limit: lim}
		if g, ok := strings.CutPrefix(name, "tool:"); ok {
			s.glob = g
		} else {
			s.meta = name
		}
		l.scopes = append(l.scopes, s)
	}
	sort.Slice(l.scopes, func(i, j int) bool { return l.scopes[i].name < l.scopes[j].name })
	return l
}

// matching returns the scopes a call of metaTool (for toolID, "" when it
// names none) counts against.
func (l *RateLimiter) matching(metaTool, toolID string) []*scope {
	var out []*scope
	for i := range l.scopes {
		s := &l.scopes[i]
		switch {
		case s.meta != "" && s.meta == metaTool:
			out = append(out, s)
		case s.glob != "" && toolID != "":
			if ok, _ := path.Match(s.glob, toolID); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// windowKey is the KV key of one scope's window for one principal.
func windowKey(scope, principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return "rl/" + scope + "/" + hex.EncodeToString(sum[:16])
}

// Check reports whether a call would be admitted, without counting it
// (dry runs). session keys the per-session caps, principal the shared
// per-minute windows.
func (l *RateLimiter) Check(ctx context.Context, session any, principal, metaTool, toolID string) *Denial {
	return l.admit(ctx, session, principal, metaTool, toolID, false)
}

// Take admits and counts a call, or refuses it without counting anything.
func (l *RateLimiter) Take(ctx context.Context, session any, principal, metaTool, toolID string) *Denial {
	return l.admit(ctx, session, principal, metaTool, toolID, true)
}

func (l *RateLimiter) admit(ctx context.Context, session any, principal, metaTool, toolID string, take bool) *Denial {
	if l == nil {
		return nil
	}
	scopes := l.matching(metaTool, toolID)
	if len(scopes) == 0 {
		return nil
	}
	// Session caps first, in memory; a taken call is counted now and
	// given back when the shared windows refuse it.
	if d := l.session(session, scopes, take, 1); d != nil {
		return d
	}
	req := state.AdmitRequest{Window: Window, Now: l.now(), Take: take}
	var windowed []*scope
	for _, s := range scopes {
		if s.limit.PerMinute > 0 {
			windowed = append(windowed, s)
			req.Keys = append(req.Keys, windowKey(s.name, principal))
			req.Limits = append(req.Limits, s.limit.PerMinute)
		}
	}
	if len(windowed) == 0 {
		return nil
	}
	res, err := l.kv.Admit(ctx, req)
	var d *Denial
	switch {
	case err != nil:
		d = &Denial{Scope: windowed[0].name, Limit: "max_calls_per_minute", Err: fmt.Errorf("rate limit: %w", err)}
	case res.Denied >= 0:
		d = &Denial{Scope: windowed[res.Denied].name, Limit: "max_calls_per_minute", RetryAfter: max(res.RetryAfter, time.Millisecond)}
	}
	if d != nil && take {
		l.session(session, scopes, true, -1)
	}
	return d
}

// session checks the session caps of scopes and, when take is set, adds
// delta to the counts (delta -1 gives a call back). It keeps at most
// MaxSessions sessions, dropping the least recently seen first.
func (l *RateLimiter) session(session any, scopes []*scope, take bool, delta int) *Denial {
	capped := false
	for _, s := range scopes {
		capped = capped || s.limit.PerSession > 0
	}
	if !capped {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tick++
	sc, ok := l.sessions[session]
	if !ok {
		if !take || delta < 0 {
			return nil
		}
		if len(l.sessions) >= MaxSessions {
			var oldest any
			var t uint64
			for k, v := range l.sessions {
				if oldest == nil || v.seen < t {
					oldest, t = k, v.seen
				}
			}
			delete(l.sessions, oldest)
		}
		sc = &sessionCounts{scopes: map[string]int{}}
		l.sessions[session] = sc
	}
	sc.seen = l.tick
	if delta > 0 {
		for _, s := range scopes {
			if s.limit.PerSession > 0 && sc.scopes[s.name] >= s.limit.PerSession {
				return &Denial{Scope: s.name, Limit: "max_calls_per_session"}
			}
		}
	}
	if take {
		for _, s := range scopes {
			if s.limit.PerSession > 0 {
				sc.scopes[s.name] += delta
			}
		}
	}
	return nil
}
