//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated in protocol 2026-07-28 only; quiver forwards them for the protocols that have them.

package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// maxAffine bounds the per-client upstream sessions open at once, over all
// upstreams: each may be a child process.
const maxAffine = 1024

// affineKey names the upstream session one downstream session has with one
// upstream.
type affineKey struct {
	ss   *mcp.ServerSession
	name string
}

// affine is one per-client upstream session; ready is closed once c is
// usable or err is set.
type affine struct {
	ready chan struct{}
	c     *upstream.Client
	err   error
}

// affinity holds the per-client upstream sessions (sessions: per_client).
type affinity struct {
	mu      sync.Mutex
	clients map[affineKey]*affine
	// watched marks the downstream sessions whose end closes their
	// upstream sessions.
	watched map[*mcp.ServerSession]bool
}

// affineClient returns the upstream session of l's upstream that belongs
// to the caller's downstream session, opening it on first use: a new MCP
// session over HTTP, a new child process over stdio. It announces exactly
// the sampling and elicitation capabilities the downstream client
// announced, so the upstream sees what the client can do.
func (r *Runtime) affineClient(ctx context.Context, l liveConn, c *caller) (*upstream.Client, error) {
	key := affineKey{ss: c.ss, name: l.c.Name()}
	a := &r.affinity
	a.mu.Lock()
	if a.clients == nil {
		a.clients = map[affineKey]*affine{}
	}
	af, ok := a.clients[key]
	if !ok {
		if len(a.clients) >= maxAffine {
			a.mu.Unlock()
			return nil, &upstream.Error{Code: CodeUpstreamUnavailable, Err: fmt.Errorf("upstream %q: %d per-client sessions are open already: %w", key.name, maxAffine, errNotSent)}
		}
		af = &affine{ready: make(chan struct{})}
		a.clients[key] = af
		a.mu.Unlock()
		r.watch(c.ss)
		r.openAffine(af, l, c)
	} else {
		a.mu.Unlock()
	}
	select {
	case <-af.ready:
	case <-ctx.Done():
		return nil, &upstream.Error{Code: CodeUpstreamUnavailable, Err: fmt.Errorf("upstream %q: per-client session not ready: %w", key.name, context.Cause(ctx))}
	}
	if af.err != nil {
		return nil, af.err
	}
	if err := af.c.WaitReady(ctx); err != nil {
		return nil, &upstream.Error{Code: CodeUpstreamUnavailable, Err: fmt.Errorf("upstream %q: per-client session: %w", key.name, err)}
	}
	return af.c, nil
}

// affineSpec is the spec of a per-client session for a client at protocol
// version: held to that version when it is older than what the upstream
// would negotiate, so that the upstream speaks to the client's session as
// it would to the client (at 2025-11-25, requests in the middle of a call
// rather than input_required results, and logging/setLevel).
func affineSpec(spec upstream.Spec, version string) upstream.Spec {
	if version != "" && protocol.AsksMidCall(version) && (spec.Protocol == "" || version < spec.Protocol) {
		spec.Protocol = version
	}
	return spec
}

// openAffine starts the per-client session af for caller c.
func (r *Runtime) openAffine(af *affine, l liveConn, c *caller) {
	defer close(af.ready)
	life := r.life
	if life == nil || life.Err() != nil {
		af.err = &upstream.Error{Code: CodeUpstreamUnavailable, Err: fmt.Errorf("upstream %q: %w", l.c.Name(), upstream.ErrClosed)}
		return
	}
	var uc *upstream.Client
	opts := upstream.Options{Logger: r.log.With("session", c.ss.ID())}
	r.relayHooks(l.c.Name(), &uc, &opts)
	caps := clientCaps(c.ss)
	if caps == nil || caps.Sampling == nil {
		opts.OnCreateMessage = nil
	} else {
		opts.Sampling = caps.Sampling
	}
	if caps == nil || caps.Elicitation == nil {
		opts.OnElicit = nil
	} else {
		opts.Elicitation = caps.Elicitation
	}
	uc = upstream.New(affineSpec(l.spec, c.version), opts)
	// What the upstream sends outside any call goes to this session, on
	// its own stream (not that of a finished request).
	r.relay.own(uc, &flight{ctx: withCaller(life, c), c: c, server: l.c.Name()})
	af.c = uc
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = uc.Run(life)
		r.relay.disown(uc)
	}()
	if lvl := r.levels.of(c.ss); lvl != "" {
		ctx, cancel := context.WithTimeout(life, relayTimeout)
		defer cancel()
		if err := uc.WaitReady(ctx); err == nil {
			_ = uc.SetLoggingLevel(ctx, lvl)
		}
	}
}

// closeAffine closes the per-client sessions of a downstream session that
// ended.
func (r *Runtime) closeAffine(ss *mcp.ServerSession) {
	a := &r.affinity
	a.mu.Lock()
	var gone []*affine
	for k, af := range a.clients {
		if k.ss == ss {
			gone = append(gone, af)
			delete(a.clients, k)
		}
	}
	delete(a.watched, ss)
	a.mu.Unlock()
	for _, af := range gone {
		<-af.ready
		if af.c != nil {
			_ = af.c.Close()
		}
	}
}

// affineOf returns the per-client sessions of a downstream session.
func (r *Runtime) affineOf(ss *mcp.ServerSession) []*upstream.Client {
	a := &r.affinity
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*upstream.Client
	for k, af := range a.clients {
		if k.ss != ss {
			continue
		}
		select {
		case <-af.ready:
			if af.c != nil {
				out = append(out, af.c)
			}
		default:
		}
	}
	return out
}
