//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated in protocol 2026-07-28 only; quiver forwards them for the protocols that have them.

package runtime

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// levelRank orders the MCP log levels (RFC 5424), most verbose first.
var levelRank = map[mcp.LoggingLevel]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// logLevels remembers the log level each downstream session asked for, and
// the level set on each shared upstream session: the most verbose any
// client asked for, since the go-sdk filters each downstream session by its
// own level anyway.
type logLevels struct {
	mu      sync.Mutex
	session map[*mcp.ServerSession]mcp.LoggingLevel
	shared  map[string]mcp.LoggingLevel
}

func (l *logLevels) of(ss *mcp.ServerSession) mcp.LoggingLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.session[ss]
}

func (l *logLevels) forget(ss *mcp.ServerSession) {
	l.mu.Lock()
	delete(l.session, ss)
	l.mu.Unlock()
}

// set records a session's level; it reports whether the shared sessions
// of upstream names must be lowered to it.
func (l *logLevels) set(ss *mcp.ServerSession, lvl mcp.LoggingLevel, names []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session == nil {
		l.session, l.shared = map[*mcp.ServerSession]mcp.LoggingLevel{}, map[string]mcp.LoggingLevel{}
	}
	if ss != nil {
		l.session[ss] = lvl
	}
	var lower []string
	for _, n := range names {
		cur, ok := l.shared[n]
		if !ok || levelRank[lvl] < levelRank[cur] {
			l.shared[n] = lvl
			lower = append(lower, n)
		}
	}
	return lower
}

// sharedLevel is the level set on upstream name's shared session ("" when
// none was).
func (l *logLevels) sharedLevel(name string) mcp.LoggingLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared[name]
}

// passthrough is the receiving middleware that forwards a client's
// logging/setLevel to the upstreams: to its own per-client sessions as it
// is, and to shared sessions when it is more verbose than their level.
// It runs after the go-sdk recorded the level for the downstream session.
func (r *Runtime) passthrough(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "logging/setLevel" {
			return res, err
		}
		p, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
		if !ok || p == nil {
			return res, err
		}
		if _, known := levelRank[p.Level]; !known {
			return res, err
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		r.watch(ss)
		var shared []string
		byName := map[string]*upstream.Client{}
		for _, c := range r.clients() {
			shared = append(shared, c.Name())
			byName[c.Name()] = c
		}
		var targets []*upstream.Client
		for _, n := range r.levels.set(ss, p.Level, shared) {
			targets = append(targets, byName[n])
		}
		if ss != nil {
			targets = append(targets, r.affineOf(ss)...)
		}
		r.setLevels(ctx, targets, p.Level)
		return res, err
	}
}

// lowerLevel lowers the level of shared upstream session uc to lvl when a
// sessionless request asks for more than it is set to.
func (r *Runtime) lowerLevel(ctx context.Context, uc *upstream.Client, lvl mcp.LoggingLevel) {
	if len(r.levels.set(nil, lvl, []string{uc.Name()})) > 0 {
		r.setLevels(ctx, []*upstream.Client{uc}, lvl)
	}
}

// setLevels sends logging/setLevel to the upstream clients concurrently,
// bounded by relayTimeout; an upstream that fails is logged and skipped.
func (r *Runtime) setLevels(ctx context.Context, targets []*upstream.Client, lvl mcp.LoggingLevel) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relayTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range targets {
		if c.State().Status != upstream.StatusReady {
			continue
		}
		wg.Go(func() {
			if err := c.SetLoggingLevel(ctx, lvl); err != nil {
				r.log.Debug("logging/setLevel not forwarded", "upstream", c.Name(), "err", err)
			}
		})
	}
	wg.Wait()
}

// subscriptions records which downstream sessions subscribed to which
// resource of which upstream, so that the upstream is subscribed once and
// unsubscribed when its last subscriber leaves or ends.
type subscriptions struct {
	mu sync.Mutex
	// by holds the subscribed sessions by upstream name and URI.
	by map[[2]string]map[*mcp.ServerSession]bool
}

// add records ss's subscription; it reports whether it is the first.
func (s *subscriptions) add(name, uri string, ss *mcp.ServerSession) (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[[2]string]map[*mcp.ServerSession]bool{}
	}
	k := [2]string{name, uri}
	if s.by[k] == nil {
		s.by[k] = map[*mcp.ServerSession]bool{}
	}
	first = len(s.by[k]) == 0
	s.by[k][ss] = true
	return first
}

// remove drops ss's subscription; it reports whether it was the last.
func (s *subscriptions) remove(name, uri string, ss *mcp.ServerSession) (last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{name, uri}
	if !s.by[k][ss] {
		return false
	}
	delete(s.by[k], ss)
	if len(s.by[k]) == 0 {
		delete(s.by, k)
		return true
	}
	return false
}

// drop removes every subscription of a session that ended and returns the
// (upstream, URI) pairs nobody subscribes to any more.
func (s *subscriptions) drop(ss *mcp.ServerSession) [][2]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone [][2]string
	for k, set := range s.by {
		if !set[ss] {
			continue
		}
		delete(set, ss)
		if len(set) == 0 {
			delete(s.by, k)
			gone = append(gone, k)
		}
	}
	return gone
}

// of returns the subscribed URIs of upstream name.
func (s *subscriptions) of(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.by {
		if k[0] == name {
			out = append(out, k[1])
		}
	}
	return out
}

// watch arranges for the end of a downstream session to release what it
// holds upstream: its per-client sessions, its log level and its resource
// subscriptions. It is called when a session first holds one of them.
func (r *Runtime) watch(ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	a := &r.affinity
	a.mu.Lock()
	if a.watched == nil {
		a.watched = map[*mcp.ServerSession]bool{}
	}
	seen := a.watched[ss]
	a.watched[ss] = true
	a.mu.Unlock()
	if seen {
		return
	}
	// Owned by the downstream session: it ends when the session does,
	// which the listener's shutdown (or stdin's end) guarantees.
	go func() {
		_ = ss.Wait()
		r.sessionEnded(ss)
	}()
}

// sessionEnded releases what a downstream session held upstream.
func (r *Runtime) sessionEnded(ss *mcp.ServerSession) {
	r.closeAffine(ss)
	r.levels.forget(ss)
	gone := r.subs.drop(ss)
	if len(gone) == 0 || r.life == nil || r.life.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.life, relayTimeout)
	defer cancel()
	for _, k := range gone {
		for _, c := range r.upstreams() {
			if c.name() == k[0] {
				if err := c.subscribe(ctx, k[1], false); err != nil {
					r.log.Debug("upstream unsubscribe failed", "upstream", k[0], "err", err)
				}
			}
		}
	}
}

// resubscribe restores what a reconnected upstream session lost: the log
// level set on it and its resource subscriptions.
func (r *Runtime) resubscribe(ctx context.Context, c *upstream.Client) {
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	if lvl := r.levels.sharedLevel(c.Name()); lvl != "" {
		if err := c.SetLoggingLevel(ctx, lvl); err != nil {
			r.log.Debug("log level not restored after reconnect", "upstream", c.Name(), "err", err)
		}
	}
	for _, uri := range r.subs.of(c.Name()) {
		if err := c.Subscribe(ctx, uri); err != nil {
			r.log.Warn("resource subscription not restored after reconnect", "upstream", c.Name(), "uri", uri, "err", err)
		}
	}
}
