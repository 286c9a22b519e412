package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/tokenexchange"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// upstreamEntry is one enabled upstream: its settings and its connection.
type upstreamEntry struct {
	cfg config.Upstream
	// exchange, when set, exchanges each caller's verified token for one
	// bound to this upstream before every call (receipts: token_handling
	// mode exchanged).
	exchange *tokenexchange.Exchanger
	conn     conn
}

// entryOf returns the entry of the upstream serving server in st, or nil.
func (r *Runtime) entryOf(st *state, server string) *upstreamEntry {
	c, ok := st.owner[server]
	if !ok {
		return nil
	}
	for _, e := range r.upstreams {
		if e.conn == c {
			return e
		}
	}
	return nil
}

// addUpstream builds the entry of upstream u: a static catalog (from
// Deps.Catalogs or its file) or a supervised live client, with its
// credentials resolved.
func (r *Runtime) addUpstream(u *config.Upstream) error {
	e := &upstreamEntry{cfg: *u}
	if src, ok := r.deps.Catalogs[u.Name]; ok {
		e.conn = newStaticConn(u.Name, src)
	} else if u.Catalog != "" {
		src, err := catalog.LoadFile(u.Catalog)
		if err != nil {
			return fmt.Errorf("upstream %q: %w", u.Name, err)
		}
		e.conn = newStaticConn(u.Name, src)
	}
	if e.conn != nil {
		r.upstreams = append(r.upstreams, e)
		r.conns = append(r.conns, e.conn)
		r.dirty[u.Name] = true
		return nil
	}
	spec, err := r.specOf(u, e)
	if err != nil {
		return err
	}
	name := u.Name
	var c *upstream.Client
	uo := upstream.Options{
		Logger:        r.log,
		OnListChanged: func(string) { r.markDirty(name) },
		OnState: func(st upstream.State) {
			r.met.upstreamState(st)
			if st.Status == upstream.StatusReady && st.Connects > 1 && r.life != nil {
				// The running client goroutine holds r.wg, so Add is safe.
				r.wg.Go(func() { r.resubscribe(r.life, c) })
			}
		},
		// A shared session announces sampling and (form) elicitation;
		// a request for a client without them is refused with
		// CLIENT_CAPABILITY_MISSING.
		//lint:ignore SA1019 deprecated in protocol 2026-07-28 only.
		Sampling:    &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{},
	}
	r.relayHooks(name, &c, &uo)
	c = upstream.New(spec, uo)
	r.clients = append(r.clients, c)
	// Pointers: conns are compared (state.owner), and a spec is not
	// comparable.
	lc := liveConn{c: c, rt: r, spec: spec, perClient: u.Sessions == config.SessionsPerClient}
	if e.exchange != nil {
		e.conn = &exchangeConn{liveConn: lc, ex: e.exchange}
	} else {
		e.conn = &lc
	}
	r.upstreams = append(r.upstreams, e)
	r.conns = append(r.conns, e.conn)
	return nil
}

// specOf resolves the transport of live upstream u: its headers and
// environment from Deps.Getenv, and its token exchange (set on e).
func (r *Runtime) specOf(u *config.Upstream, e *upstreamEntry) (upstream.Spec, error) {
	headers, err := u.ResolveHeaders(r.deps.Getenv)
	if err != nil {
		return upstream.Spec{}, err
	}
	env, err := u.ResolveEnv(r.deps.Getenv)
	if err != nil {
		return upstream.Spec{}, err
	}
	var bearer func(context.Context) (string, error)
	if te := u.Credentials.TokenExchange; te != nil {
		if e.exchange, bearer, err = exchangerFor(u, te, r.deps.Getenv); err != nil {
			return upstream.Spec{}, err
		}
	}
	spec := upstream.Spec{
		Name:           u.Name,
		Command:        u.Command,
		Env:            env,
		Dir:            u.Dir,
		URL:            u.URL,
		SSE:            u.SSE,
		Headers:        headers,
		Bearer:         bearer,
		ConnectTimeout: time.Duration(u.ConnectTimeout),
		CallTimeout:    time.Duration(u.CallTimeout),
	}
	if err := spec.Validate(); err != nil {
		return upstream.Spec{}, fmt.Errorf("runtime: %w", err)
	}
	return spec, nil
}

// gatewaySubjectKey is the cache key of the gateway's own subject token;
// principal keys start with "jwt:" or "local:", so it never collides.
const gatewaySubjectKey = "quiver:gateway"

// exchangerFor builds the RFC 8693 exchanger of upstream u, and the token
// source of the requests no caller is bound to: the exchange of the
// gateway's own subject token when gateway_token_env is set, else nil
// (those requests carry no Authorization header).
func exchangerFor(u *config.Upstream, te *config.TokenExchange, getenv func(string) (string, bool)) (*tokenexchange.Exchanger, func(context.Context) (string, error), error) {
	secret, gatewayToken, err := u.ResolveTokenExchange(getenv)
	if err != nil {
		return nil, nil, err
	}
	tokenType := tokenexchange.TokenTypeAccessToken
	if te.SubjectTokenType == config.SubjectTokenJWT {
		tokenType = tokenexchange.TokenTypeJWT
	}
	ex, err := tokenexchange.New(tokenexchange.Config{
		TokenURL: te.TokenURL, ClientID: te.ClientID, ClientSecret: secret,
		Audience: te.Audience, Scope: te.Scope, SubjectTokenType: tokenType,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("upstream %q: credentials.token_exchange: %w", u.Name, err)
	}
	if gatewayToken == "" {
		return ex, nil, nil
	}
	bearer := func(ctx context.Context) (string, error) {
		return ex.Exchange(ctx, gatewaySubjectKey, gatewayToken, time.Time{})
	}
	return ex, bearer, nil
}
