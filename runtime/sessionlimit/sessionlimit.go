// Package sessionlimit bounds the sessions an MCP HTTP listener holds: at
// most so many per principal and so many in all. A session is admitted
// when the request that would open it arrives, and its slot is released
// when the session ends (closed by its client, reaped when idle, or never
// initialized), so a flood of session openings is refused at the door
// instead of growing memory and goroutines without bound.
package sessionlimit

import (
	"errors"
	"sync"
)

// Refusals of Acquire.
var (
	// ErrPrincipal: the principal holds its maximum of sessions.
	ErrPrincipal = errors.New("sessionlimit: the principal holds its maximum of sessions")
	// ErrTotal: the listener holds its maximum of sessions.
	ErrTotal = errors.New("sessionlimit: the listener holds its maximum of sessions")
)

// Limits are the bounds of a Limiter; each must be positive.
type Limits struct {
	PerPrincipal int
	Total        int
}

// Limiter counts the sessions held per principal and in all. It is safe
// for concurrent use.
type Limiter struct {
	limits Limits

	mu    sync.Mutex
	byKey map[string]int
	total int
}

// New returns a Limiter with limits l; a bound below 1 is taken as 1.
func New(l Limits) *Limiter {
	l.PerPrincipal, l.Total = max(l.PerPrincipal, 1), max(l.Total, 1)
	return &Limiter{limits: l, byKey: map[string]int{}}
}

// Limits returns the limiter's bounds.
func (l *Limiter) Limits() Limits { return l.limits }

// Open returns the number of slots held.
func (l *Limiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Held returns the number of slots principal key holds.
func (l *Limiter) Held(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byKey[key]
}

// Acquire takes a slot for principal key, or refuses with ErrPrincipal
// (the principal is at its bound, checked first: it is that caller's own
// doing) or ErrTotal.
func (l *Limiter) Acquire(key string) (*Slot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey[key] >= l.limits.PerPrincipal {
		return nil, ErrPrincipal
	}
	if l.total >= l.limits.Total {
		return nil, ErrTotal
	}
	l.byKey[key]++
	l.total++
	return &Slot{l: l, key: key}, nil
}

// Slot is one admitted session's place.
type Slot struct {
	l    *Limiter
	key  string
	once sync.Once
}

// Release gives the slot back; later calls do nothing.
func (s *Slot) Release() {
	s.once.Do(func() {
		l := s.l
		l.mu.Lock()
		defer l.mu.Unlock()
		l.total--
		if l.byKey[s.key]--; l.byKey[s.key] <= 0 {
			delete(l.byKey, s.key)
		}
	})
}
