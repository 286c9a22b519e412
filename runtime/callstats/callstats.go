// Package callstats keeps a short, bounded memory of recent upstream calls
// per server (count, failures, latency) so that an operator's view can
// show "calls, error rate, p50 and p99 of the last minutes" without a
// metrics system. Prometheus (/metrics) keeps the long history; this keeps
// only the last calls, in a fixed-size ring per server.
package callstats

import (
	"slices"
	"sync"
	"time"
)

// DefaultCapacity is the calls remembered per server.
const DefaultCapacity = 2048

// DefaultMaxKeys bounds the servers remembered; calls of further servers
// are not counted (a fleet of more upstreams than this is configured
// rarely, and the bound keeps memory flat under any key churn).
const DefaultMaxKeys = 1024

// Window is the recent calls of each server. The zero value is not usable;
// build one with New. It is safe for concurrent use.
type Window struct {
	capacity, maxKeys int
	mu                sync.Mutex
	rings             map[string]*ring
}

type sample struct {
	at     time.Time
	took   time.Duration
	failed bool
}

type ring struct {
	buf  []sample
	next int
	full bool
}

// New returns a Window remembering up to capacity calls per server for up
// to maxKeys servers (values below 1 take the defaults).
func New(capacity, maxKeys int) *Window {
	if capacity < 1 {
		capacity = DefaultCapacity
	}
	if maxKeys < 1 {
		maxKeys = DefaultMaxKeys
	}
	return &Window{capacity: capacity, maxKeys: maxKeys, rings: map[string]*ring{}}
}

// Record remembers one call of server that ended at at after took.
func (w *Window) Record(server string, at time.Time, took time.Duration, failed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.rings[server]
	if r == nil {
		if len(w.rings) >= w.maxKeys {
			return
		}
		r = &ring{buf: make([]sample, w.capacity)}
		w.rings[server] = r
	}
	r.buf[r.next] = sample{at: at, took: took, failed: failed}
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// Stats summarises the calls of one server since a point in time.
type Stats struct {
	// Calls and Failed count the calls remembered since the cut-off.
	Calls, Failed int
	// P50 and P99 are latency percentiles of those calls (0 without
	// calls).
	P50, P99 time.Duration
	// Truncated is set when the ring was full and older calls inside the
	// window were forgotten: the figures cover the newest calls only.
	Truncated bool
}

// ErrorRate is Failed/Calls (0 without calls).
func (s Stats) ErrorRate() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Failed) / float64(s.Calls)
}

// Since summarises the calls of server that ended at or after from.
func (w *Window) Since(server string, from time.Time) Stats {
	w.mu.Lock()
	r := w.rings[server]
	var lat []time.Duration
	var st Stats
	if r != nil {
		n := r.next
		if r.full {
			n = len(r.buf)
		}
		lat = make([]time.Duration, 0, n)
		for i := range n {
			s := r.buf[i]
			if s.at.Before(from) {
				continue
			}
			st.Calls++
			if s.failed {
				st.Failed++
			}
			lat = append(lat, s.took)
		}
		// The oldest remembered call is inside the window: older ones
		// inside it may have been overwritten.
		if r.full && st.Calls == len(r.buf) {
			st.Truncated = true
		}
	}
	w.mu.Unlock()
	if len(lat) > 0 {
		slices.Sort(lat)
		st.P50, st.P99 = percentile(lat, 50), percentile(lat, 99)
	}
	return st
}

// percentile is the nearest-rank percentile p of sorted values.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}
