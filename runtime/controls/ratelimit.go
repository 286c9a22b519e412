package controls

import (
	"path"
	"sort"
	"strings"
	"sync"
	"time"
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
}

// scope is one configured limit: a meta-tool name or "tool:" + a tool_id
// glob.
type scope struct {
	name  string
	meta  string // meta-tool name, or ""
	glob  string // tool_id glob, for tool: scopes
	limit Limit
}

// RateLimiter enforces per-session limits per meta-tool and per tool_id
// glob (spec 003 §4.5). Each scope counts every call it matches: a
// tool:<glob> scope counts the calls of all the tools it matches together.
// Counts are per process. Safe for concurrent use.
type RateLimiter struct {
	scopes []scope
	now    func() time.Time

	mu       sync.Mutex
	sessions map[any]*sessionCounts
	tick     uint64
}

type sessionCounts struct {
	seen   uint64 // tick of the last use, for eviction
	scopes map[string]*counter
}

type counter struct {
	total int
	times []time.Time // calls inside the window, oldest first
}

// NewRateLimiter returns a limiter for limits keyed by scope: a meta-tool
// name (tool_browse, tool_hydrate, tool_execute, tool_view) or
// "tool:<tool_id glob>" (path.Match syntax). now is the clock (time.Now
// when nil). Nil is returned for no limits: a nil *RateLimiter admits
// everything.
func NewRateLimiter(limits map[string]Limit, now func() time.Time) *RateLimiter {
	if len(limits) == 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	l := &RateLimiter{now: now, sessions: map[any]*sessionCounts{}}
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

// Check reports whether a call would be admitted, without counting it
// (dry runs).
func (l *RateLimiter) Check(session any, metaTool, toolID string) *Denial {
	return l.admit(session, metaTool, toolID, false)
}

// Take admits and counts a call, or refuses it without counting anything.
func (l *RateLimiter) Take(session any, metaTool, toolID string) *Denial {
	return l.admit(session, metaTool, toolID, true)
}

func (l *RateLimiter) admit(session any, metaTool, toolID string, take bool) *Denial {
	if l == nil {
		return nil
	}
	scopes := l.matching(metaTool, toolID)
	if len(scopes) == 0 {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	sc := l.session(session)
	for _, s := range scopes {
		c := sc.scopes[s.name]
		if c == nil {
			if !take {
				continue
			}
			c = &counter{}
			sc.scopes[s.name] = c
		}
		c.prune(now)
		if s.limit.PerSession > 0 && c.total >= s.limit.PerSession {
			return &Denial{Scope: s.name, Limit: "max_calls_per_session"}
		}
		if s.limit.PerMinute > 0 && len(c.times) >= s.limit.PerMinute {
			wait := c.times[len(c.times)-s.limit.PerMinute].Add(Window).Sub(now)
			return &Denial{Scope: s.name, Limit: "max_calls_per_minute", RetryAfter: max(wait, time.Millisecond)}
		}
	}
	if !take {
		return nil
	}
	for _, s := range scopes {
		c := sc.scopes[s.name]
		c.total++
		if s.limit.PerMinute > 0 {
			c.times = append(c.times, now)
		}
	}
	return nil
}

// session returns the counts of session, creating them (and evicting the
// least recently seen session beyond MaxSessions). Called with mu held.
func (l *RateLimiter) session(session any) *sessionCounts {
	l.tick++
	sc, ok := l.sessions[session]
	if !ok {
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
		sc = &sessionCounts{scopes: map[string]*counter{}}
		l.sessions[session] = sc
	}
	sc.seen = l.tick
	return sc
}

// prune drops the calls that left the window.
func (c *counter) prune(now time.Time) {
	cut := 0
	for cut < len(c.times) && !c.times[cut].Add(Window).After(now) {
		cut++
	}
	if cut > 0 {
		c.times = append(c.times[:0], c.times[cut:]...)
	}
}
