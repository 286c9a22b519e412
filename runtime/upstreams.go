package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	qstate "github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/tokenexchange"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// upstreamEntry is one enabled upstream: its connection (it is the conn
// the runtime calls; its session mode lives there, as liveConn.perClient)
// and the settings the request path reads, derived once from its
// configuration. The catalog state maps every server name to the
// entry serving it, so what an item's upstream is configured with is a
// field read.
type upstreamEntry struct {
	conn
	// trust and risk classify the upstream in receipts and policy input.
	trust, risk string
	// prefix prefixes its tools' and prompts' names where they are listed
	// directly.
	prefix string
	// tokenMode is the receipts' token_handling mode: exchanged per
	// caller, a configured credential (vault), or none.
	tokenMode string
	// workspace and egress, when set, confine its tools' path and URL
	// arguments.
	workspace *config.Workspace
	egress    *config.Egress
	// sandbox is the isolation its calls' receipts record.
	sandbox receipts.Sandbox
}

// newEntry returns the entry of upstream u served by c; exchanged tells
// whether its credential is exchanged per caller.
func newEntry(u *config.Upstream, c conn, exchanged bool) *upstreamEntry {
	e := &upstreamEntry{conn: c, trust: string(u.TrustLevel), risk: string(u.Risk), prefix: u.ToolPrefix,
		tokenMode: receipts.TokenNone, workspace: u.Workspace, egress: u.Egress, sandbox: sandboxReceipt(u)}
	switch {
	case exchanged:
		e.tokenMode = receipts.TokenExchanged
	case !u.Credentials.IsZero():
		e.tokenMode = receipts.TokenVault
	}
	return e
}

// addUpstream builds the entry of upstream u: a static catalog (from
// Deps.Catalogs or its file) or a supervised live client, with its
// credentials resolved.
func (r *Runtime) addUpstream(u *config.Upstream) error {
	if src, ok := r.deps.Catalogs[u.Name]; ok {
		r.addEntry(newEntry(u, newStaticConn(u.Name, src), false))
		return nil
	}
	if u.Catalog != "" {
		src, err := catalog.LoadFile(u.Catalog)
		if err != nil {
			return fmt.Errorf("upstream %q: %w", u.Name, err)
		}
		r.addEntry(newEntry(u, newStaticConn(u.Name, src), false))
		return nil
	}
	spec, ex, err := r.specOf(u)
	if err != nil {
		return err
	}
	name := u.Name
	var c *upstream.Client
	uo := upstream.Options{
		Logger: r.log,
		OnListChanged: func(kind string) {
			r.mu.Lock()
			if r.heard == nil {
				r.heard = map[string]bool{}
			}
			r.heard[kind] = true
			r.mu.Unlock()
			r.markDirty(name)
		},
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
	lc := liveConn{c: c, spec: spec, relay: r.relay, input: r.mrtr, levels: r.levels.of, lower: r.lowerLevel}
	if u.Sessions == config.SessionsPerClient {
		lc.perClient = r.affineClient
	}
	// Pointers: entries are compared (state.owner), and a spec is not
	// comparable.
	var cn conn = &lc
	if ex != nil {
		cn = &exchangeConn{liveConn: lc, ex: ex}
	}
	r.addEntry(newEntry(u, cn, ex != nil))
	return nil
}

// addEntry appends e in configuration order, marked for listing.
func (r *Runtime) addEntry(e *upstreamEntry) {
	r.upstreams = append(r.upstreams, e)
	r.dirty[e.name()] = true
}

// specOf resolves the transport of live upstream u: its headers and
// environment from Deps.Getenv, and its token exchanger (nil without
// token exchange).
func (r *Runtime) specOf(u *config.Upstream) (upstream.Spec, *tokenexchange.Exchanger, error) {
	headers, err := u.ResolveHeaders(r.deps.Getenv)
	if err != nil {
		return upstream.Spec{}, nil, err
	}
	env, err := u.ResolveEnv(r.deps.Getenv)
	if err != nil {
		return upstream.Spec{}, nil, err
	}
	var ex *tokenexchange.Exchanger
	var bearer func(context.Context) (string, error)
	if te := u.Credentials.TokenExchange; te != nil {
		if ex, bearer, err = exchangerFor(u, te, r.deps.Getenv, r.kv, r.log); err != nil {
			return upstream.Spec{}, nil, err
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
		Protocol:       u.Protocol,
	}
	if err := r.sandboxSpec(u, &spec); err != nil {
		return upstream.Spec{}, nil, err
	}
	if err := spec.Validate(); err != nil {
		return upstream.Spec{}, nil, fmt.Errorf("runtime: %w", err)
	}
	return spec, ex, nil
}

// gatewaySubjectKey is the cache key of the gateway's own subject token;
// principal keys start with "jwt:" or "local:", so it never collides.
const gatewaySubjectKey = "quiver:gateway"

// exchangerFor builds the RFC 8693 exchanger of upstream u, and the token
// source of the requests no caller is bound to: the exchange of the
// gateway's own subject token when gateway_token_env is set, else nil
// (those requests carry no Authorization header).
func exchangerFor(u *config.Upstream, te *config.TokenExchange, getenv func(string) (string, bool), kv qstate.KV, log *slog.Logger) (*tokenexchange.Exchanger, func(context.Context) (string, error), error) {
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
		KV: kv, Logger: log,
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
