package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// startup tracks the runtime's start: the first catalog, the failure that
// ends the runtime, and a signal on every upstream state transition.
type startup struct {
	publishOnce sync.Once
	published   chan struct{} // closed once the first catalog is served

	failOnce sync.Once
	failed   chan struct{} // closed when the runtime cannot serve
	err      error         // why; written before failed is closed

	mu    sync.Mutex
	moved chan struct{} // closed and replaced on every upstream transition
}

func (s *startup) init() {
	s.published, s.failed, s.moved = make(chan struct{}), make(chan struct{}), make(chan struct{})
}

// publish marks the first catalog served (also at Close, so that nothing
// waits on a runtime that will never publish).
func (s *startup) publish() { s.publishOnce.Do(func() { close(s.published) }) }

func (s *startup) fail(err error) {
	s.failOnce.Do(func() {
		s.err = err
		close(s.failed)
	})
}

// changed returns a channel closed at the next upstream transition.
func (s *startup) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moved
}

// Published returns a channel closed once the first catalog is served (or
// the runtime closed before it could be).
func (r *Runtime) Published() <-chan struct{} { return r.start.published }

// Failed returns a channel closed when the runtime cannot go on serving;
// Err then says why. ServeStdio and ServeHTTP return Err when it closes.
func (r *Runtime) Failed() <-chan struct{} { return r.start.failed }

// Err returns why the runtime failed, or nil.
func (r *Runtime) Err() error {
	select {
	case <-r.start.failed:
		return r.start.err
	default:
		return nil
	}
}

// upstreamMoved wakes what waits for upstream transitions; clients call
// it from their OnState hooks.
func (r *Runtime) upstreamMoved() {
	r.start.mu.Lock()
	close(r.start.moved)
	r.start.moved = make(chan struct{})
	r.start.mu.Unlock()
}

// Upstream phases in /healthz and tool_browse.
const (
	phaseStarting = "starting" // no attempt finished yet
	phaseReady    = "ready"
	phaseFailed   = "failed" // the last attempt failed; retried with backoff
)

// upHealth is the phase of a live upstream. Unlike the client's status
// it remembers a failure while the client tries again, until it is ready.
type upHealth struct {
	mu    sync.Mutex
	phase string
	err   string
}

// observe takes in a state transition.
func (h *upHealth) observe(st upstream.State) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case st.Status == upstream.StatusReady:
		h.phase, h.err = phaseReady, ""
	case st.Err != nil:
		h.phase, h.err = phaseFailed, sanitize(st.Err.Error())
	case st.Status == upstream.StatusClosed:
		h.phase = phaseFailed
	case h.phase == "" || h.phase == phaseReady:
		h.phase = phaseStarting
	}
}

// get returns the phase and, when failed, why.
func (h *upHealth) get() (phase, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.phase == "" {
		return phaseStarting, ""
	}
	return h.phase, h.err
}

// waitSettled waits until every live entry of es is ready or has failed
// an attempt, at most d.
func (r *Runtime) waitSettled(ctx context.Context, es []*upstreamEntry, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		moved := r.start.changed()
		settled := true
		for _, e := range es {
			if e.health != nil {
				if ph, _ := e.health.get(); ph == phaseStarting {
					settled = false
					break
				}
			}
		}
		if settled {
			return
		}
		select {
		case <-moved:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// upstreamNote is an upstream that is not (yet) in the catalog, as
// tool_browse reports it.
type upstreamNote struct {
	Name  string `json:"name,omitempty"`
	State string `json:"state"` // starting | failed
	Error string `json:"error,omitempty"`
}

// pending returns the live upstreams that are not ready, in configuration
// order; anonymous leaves their names and errors out, for callers whose
// view of the fleet a policy narrows (an upstream's name tells of tools
// they may not see).
func (r *Runtime) pending(anonymous bool) []upstreamNote {
	var out []upstreamNote
	for _, e := range r.upstreams() {
		if e.health == nil {
			continue
		}
		if ph, why := e.health.get(); ph != phaseReady {
			n := upstreamNote{Name: e.name(), State: ph, Error: why}
			if anonymous {
				n.Name, n.Error = "", ""
			}
			out = append(out, n)
		}
	}
	return out
}

// pendingText is the line tool_browse adds while upstreams are missing.
func pendingText(notes []upstreamNote) string {
	var starting, failed []string
	for _, n := range notes {
		if n.State == phaseFailed {
			failed = append(failed, n.Name)
		} else {
			starting = append(starting, n.Name)
		}
	}
	list := func(names []string) string {
		if names[0] == "" {
			return fmt.Sprintf("%d", len(names))
		}
		return strings.Join(names, ", ")
	}
	var parts []string
	if len(starting) > 0 {
		parts = append(parts, "still starting: "+list(starting))
	}
	if len(failed) > 0 {
		parts = append(parts, "failed: "+list(failed))
	}
	return "(upstreams " + strings.Join(parts, "; ") + "; their tools are not listed until they come up)"
}

// warmUp publishes the first catalog once every upstream is ready or has
// failed an attempt (or at ReadyTimeout), then rebuilds on every change
// until ctx ends.
func (r *Runtime) warmUp(ctx context.Context) {
	r.waitSettled(ctx, r.upstreams(), r.cfg.Timing.ReadyTimeout)
	if ctx.Err() != nil {
		return
	}
	r.markAll()
	if err := r.rebuild(ctx); err != nil {
		if ctx.Err() == nil {
			r.start.fail(err)
		}
		return
	}
	if w := r.state.Load().exp.clashes; len(w) > 0 {
		r.start.fail(fmt.Errorf("direct exposure: name collision: %s", strings.Join(w, "; ")))
		return
	}
	if notes := r.pending(false); len(notes) > 0 {
		for _, n := range notes {
			r.log.Warn("upstream not ready at the first catalog; it joins when it comes up", "upstream", n.Name, "state", n.State, "err", n.Error)
		}
	}
	r.start.publish()
	r.rebuildLoop(ctx)
}

// markAll schedules a re-listing of every upstream in force.
func (r *Runtime) markAll() {
	r.mu.Lock()
	for _, e := range r.upstreams() {
		r.dirty[e.name()] = true
	}
	r.mu.Unlock()
}

// awaitCatalog is the receiving middleware that holds requests reading the
// catalog until the first one is published (at most Timing.ReadyTimeout
// after Start, plus the build): the handshake, pings, notifications and
// logging/setLevel pass at once.
func (r *Runtime) awaitCatalog(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch {
		case method == "initialize", method == "ping", method == "logging/setLevel", method == "server/discover",
			strings.HasPrefix(method, "notifications/"):
			return next(ctx, method, req)
		}
		select {
		case <-r.start.published:
		case <-r.start.failed:
			return nil, r.start.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return next(ctx, method, req)
	}
}

// WaitPublished waits until the first catalog is served and returns nil,
// or returns why the runtime failed, or ctx's error.
func (r *Runtime) WaitPublished(ctx context.Context) error {
	select {
	case <-r.start.published:
		return r.Err()
	case <-r.start.failed:
		return r.start.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
