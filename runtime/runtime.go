// Package runtime is quiver's ProxyRuntime: it connects the upstream fleet,
// keeps an immutable catalog and router built from the fleet's listings,
// and serves the meta-tools (tool_browse, tool_hydrate, tool_execute,
// tool_view, and the resource and prompt verbs) over MCP, in gateway or
// transparent-proxy mode, on stdio or streamable HTTP.
//
// The catalog, router and upstream ownership live in one immutable state
// that a rebuild replaces with a single atomic pointer store (spec 003
// §4.6): a call sees the old or the new catalog, never a mix.
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/user"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-mcp/quiver/runtime/tokenexchange"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/firewall"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/controls"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Mode selects the surface a runtime serves.
type Mode string

// Modes.
const (
	// ModeGateway lists the meta-tools only; tools are found with
	// tool_browse (spec 003 §4.2).
	ModeGateway Mode = "gateway"
	// ModeProxy lists every upstream tool as a stripped entry plus
	// tool_hydrate, tool_execute and tool_view (spec 003 §4.1).
	ModeProxy Mode = "proxy"
	// ModeDirect lists every upstream tool, prompt, resource and resource
	// template with its real definition, tools and prompts under their
	// upstream's ToolPrefix: a classic aggregating gateway, with quiver's
	// guards on every call.
	ModeDirect Mode = "direct"
)

// UpstreamOptions describe one upstream: a live server (Spec) or a static
// catalog (Catalog).
type UpstreamOptions struct {
	Name string
	// Spec is a live MCP server; ignored when Catalog is set.
	Spec upstream.Spec
	// Catalog is a static catalog source served with canned results.
	Catalog *catalog.Source
	// TrustLevel (internal|verified|community|unknown) and Risk
	// (LOW|MEDIUM|HIGH|CRITICAL) classify the upstream; empty means
	// unknown and HIGH.
	TrustLevel string
	Risk       string
	// Credentialed is true when the upstream's credentials come from
	// quiver's configuration (receipts: token_handling.mode vault).
	Credentialed bool
	// Exchange, when set, exchanges each caller's verified token for one
	// bound to this upstream before every call (RFC 8693; receipts:
	// token_handling.mode exchanged). Set Spec.Bearer for the requests no
	// caller is bound to.
	Exchange *tokenexchange.Exchanger
	// Workspace, when set, confines the path arguments of this upstream's
	// tools to its roots (PATH_OUTSIDE_WORKSPACE otherwise).
	Workspace *WorkspaceGuard
	// Egress, when set, confines the URL arguments of this upstream's
	// tools to its allowlist (EGRESS_BLOCKED otherwise).
	Egress *EgressGuard
	// ToolPrefix prefixes the names of this upstream's tools and prompts
	// where they are listed directly ("" keeps the upstream's names).
	ToolPrefix string
	// PerClient gives every downstream session an upstream session of its
	// own (a live upstream only); see the relay for what it changes.
	PerClient bool
}

// Options configure a Runtime.
type Options struct {
	Mode      Mode
	Upstreams []UpstreamOptions
	// TopK is the default number of cards per browse (1..50, default 10).
	TopK int
	// MaxChildren bounds the children of a ChoiceGraph node (default 20).
	MaxChildren int
	// CacheStable turns on the cache-stable browse order (spec 003 §5).
	CacheStable bool
	// SchemaLimits and StrictSchemas configure catalog ingest (§4.4).
	SchemaLimits  catalog.SchemaLimits
	StrictSchemas bool
	// CallTimeout bounds one tool_execute dispatch (default 60 s); the
	// upstream's own CallTimeout also applies.
	CallTimeout time.Duration
	// ReadyTimeout bounds how long Start waits for the upstreams before
	// publishing the first catalog (default 10 s); slower upstreams join
	// the catalog when they come up.
	ReadyTimeout time.Duration
	// RefreshInterval re-lists every upstream periodically (0: only on
	// list_changed notifications and reconnects).
	RefreshInterval time.Duration
	// StateDir holds the artifact store (StateDir/artifacts); "" keeps
	// artifacts in memory.
	StateDir string
	// ArtifactTTL and ArtifactMaxBytes bound the artifact store (defaults
	// 24 h and 1 GiB).
	ArtifactTTL      time.Duration
	ArtifactMaxBytes int64
	// MaxInlineTokens is the firewall's inline budget (default 800).
	MaxInlineTokens int
	// FirewallOff returns every result inline, however large.
	FirewallOff bool
	// FirewallOffFor are tool globs (tool_id or upstream tool name) whose
	// directly called results go to the client as they are, however large.
	FirewallOffFor []string
	// Expose are tool globs (tool_id, upstream tool name or exposed name)
	// that gateway mode lists directly, with their real schemas, beside the
	// meta-tools.
	Expose []string
	// LocalPrincipal names the principal of stdio sessions (default the
	// process owner's user name, else "local").
	LocalPrincipal string
	// Version is reported in the MCP server info.
	Version string
	Logger  *slog.Logger
	// Cards builds ChoiceCards; nil builds the default cl100k_base builder.
	Cards *choicecard.Builder

	// Environment decides the fate of tools no registry manifest
	// classifies: guard.EnvProd (the default) denies them
	// (TOOL_UNCLASSIFIED_DENIED), guard.EnvDev allows them with a logged
	// warning.
	Environment guard.Environment
	// Registry loads the tool_registry manifests (spec 000); nil means no
	// manifests. Start loads them once and pins the result in the connector
	// layer; every catalog rebuild loads them again for the front door and
	// the cards, so a registry changed on disk while quiver runs is refused
	// (REGISTRY_VERSION_MISMATCH) until a restart pins it.
	Registry func() (*guard.Registry, error)
	// Principals holds capability constraints by principal name: the stdio
	// principal is LocalPrincipal; "*" applies to every principal not named
	// (HTTP sessions, until callers authenticate).
	Principals map[string]Principal
	// IdempotencyTTL is how long idempotency records of write calls are
	// kept (default 24 h); they live in StateDir/idempotency, or in memory
	// without a state directory.
	IdempotencyTTL time.Duration

	// The dispatch controls of spec 003 §4.4-§4.5; each zero value is off
	// and leaves tool_execute exactly as it is without it.
	//
	// Retry retries transient upstream failures (MaxAttempts > 1). Write
	// tools are retried only when the call provably never left quiver.
	Retry controls.RetryPolicy
	// Cache, when set, caches results of read-only tools.
	Cache *controls.CacheOptions
	// RateLimits are per-session limits by scope: a meta-tool name or
	// "tool:<tool_id glob>".
	RateLimits map[string]controls.Limit
	// TolerantArgs applies the argument repairs of spec 003 §4.4.
	TolerantArgs bool
	// AllowedHosts are the Host header values the HTTP listener accepts
	// (empty: loopback listeners accept loopback hosts only, the go-sdk's
	// DNS-rebinding rule); AllowedOrigins are the browser origins it
	// accepts (empty: no cross-origin browser requests).
	AllowedHosts, AllowedOrigins []string
	// SessionIdleTimeout closes HTTP sessions that sent no request for this
	// long (0: never).
	SessionIdleTimeout time.Duration

	// The safety profile (spec 001).
	//
	// Auth, when it has issuers, authenticates every HTTP request to the
	// MCP path (identity middleware); its Local block describes the stdio
	// principal (Sub defaults to LocalPrincipal). Without issuers HTTP
	// sessions are anonymous, each its own principal (warned at startup).
	Auth identity.Config
	// Getenv reads the HS256 secrets of Auth (default os.Getenv).
	Getenv func(string) string
	// PolicyFile, when set, is the policy deciding visibility and
	// invocation, hot-reloaded every PolicyWatchInterval; a configured
	// policy is default-deny. Policy is a fixed policy (tests); with
	// neither, everything is allowed (warned at startup).
	PolicyFile          string
	PolicyWatchInterval time.Duration
	Policy              *policy.Policy
	// ApprovalTTL and ApprovalMaxPending bound the approval store
	// (StateDir/approvals).
	ApprovalTTL        time.Duration
	ApprovalMaxPending int
	// ReceiptsOff writes no receipts; ReceiptsCopy receives a copy of
	// every receipt line. Receipts go to StateDir/receipts.
	ReceiptsOff  bool
	ReceiptsCopy io.Writer
	// IncidentPersist keeps the incident state in StateDir/incident.
	IncidentPersist bool
	// AdminToken and AdminClaim enable the admin API at /admin/v1/ of
	// the HTTP listener.
	AdminToken []byte
	AdminClaim *admin.Claim
}

// Principal is the capability constraints of one principal.
type Principal struct {
	// ReadOnly confines the principal to tools the registry classifies
	// read (TOOL_CLASS_MISMATCH otherwise).
	ReadOnly bool
}

// Runtime serves one gateway. Create it with New, then Start it, serve
// MCP sessions with Server or ServeStdio/Handler, and Close it.
type Runtime struct {
	opts   Options
	log    *slog.Logger
	cards  *choicecard.Builder
	server *mcp.Server
	met    *metrics

	conns   []conn
	clients []*upstream.Client

	store artifacts.Store
	fw    *firewall.Firewall

	// The execute path: the connector layer pinned at Start, the
	// idempotency records (open when the pinned registry has write tools),
	// the dispatch controls, and the compiled tool_call schema.
	connector     *guard.Connector
	idem          *guard.IdempotencyStore
	cache         *controls.Cache[*mcp.CallToolResult]
	limiter       *controls.RateLimiter
	callSchema    *jsonschema.Schema
	executeSchema json.RawMessage

	state atomic.Pointer[state]

	mu       sync.Mutex // guards listings and dirty
	listings map[string]catalog.Source
	// templates are the resource templates of each upstream (direct mode).
	templates map[string][]*mcp.ResourceTemplate
	dirty     map[string]bool
	wake      chan struct{}  // rebuild trigger, capacity 1
	rebuilt   chan struct{}  // closed and replaced after every rebuild
	retired   *router.Router // the previous state's router, closed at the next swap

	sessions sessionStates

	// Two-way forwarding: the relay routes what upstreams send during
	// calls, affinity holds the per-client upstream sessions, levels and
	// subs what clients asked of the upstreams; life is Start's context.
	relay    *relay
	affinity affinity
	levels   logLevels
	subs     subscriptions
	life     context.Context

	// The safety profile: the verifier (nil without issuers), the
	// authorizer (incident state, policy, approvals), the recorder
	// (receipts, metrics and logs of every request), and the admin API.
	verifier *identity.Verifier
	auth     authorizer
	rec      recorder
	admin    http.Handler

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New validates opts and builds a Runtime. It connects nothing: Start does.
func New(opts Options) (*Runtime, error) {
	if opts.Mode == "" {
		opts.Mode = ModeGateway
	}
	if opts.Mode != ModeGateway && opts.Mode != ModeProxy && opts.Mode != ModeDirect {
		return nil, fmt.Errorf("runtime: unknown mode %q", opts.Mode)
	}
	if opts.TopK <= 0 {
		opts.TopK = router.DefaultTopK
	}
	if opts.TopK > router.MaxTopK {
		return nil, fmt.Errorf("runtime: top_k %d exceeds %d", opts.TopK, router.MaxTopK)
	}
	if opts.MaxChildren <= 0 {
		opts.MaxChildren = 20
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.LocalPrincipal == "" {
		opts.LocalPrincipal = "local"
		if u, err := user.Current(); err == nil && u.Username != "" {
			opts.LocalPrincipal = u.Username
		}
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	switch opts.Environment {
	case "":
		opts.Environment = guard.EnvProd
	case guard.EnvProd, guard.EnvDev:
	default:
		return nil, fmt.Errorf("runtime: unknown environment %q", opts.Environment)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cards := opts.Cards
	if cards == nil {
		var err error
		if cards, err = choicecard.NewDefaultBuilder(); err != nil {
			return nil, err
		}
	}
	r := &Runtime{
		opts:      opts,
		log:       log,
		cards:     cards,
		met:       newMetrics(),
		listings:  map[string]catalog.Source{},
		templates: map[string][]*mcp.ResourceTemplate{},
		dirty:     map[string]bool{},
		wake:      make(chan struct{}, 1),
		rebuilt:   make(chan struct{}),
		relay:     newRelay(),
	}
	r.rec = recorder{log: log, met: r.met, auth: &r.auth}
	r.sessions.init()
	if err := r.initExecute(); err != nil {
		return nil, err
	}
	if err := r.initIdentity(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, u := range opts.Upstreams {
		if u.Name == "" {
			return nil, errors.New("runtime: an upstream has no name")
		}
		if seen[u.Name] {
			return nil, fmt.Errorf("runtime: upstream %q configured twice", u.Name)
		}
		seen[u.Name] = true
		if u.Catalog != nil {
			r.conns = append(r.conns, newStaticConn(u.Name, *u.Catalog))
			r.dirty[u.Name] = true
			continue
		}
		spec := u.Spec
		spec.Name = u.Name
		if err := spec.Validate(); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		name := u.Name
		var c *upstream.Client
		uo := upstream.Options{
			Logger:        log,
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
		lc := liveConn{c: c, rt: r, spec: spec, perClient: u.PerClient}
		if u.Exchange != nil {
			r.conns = append(r.conns, &exchangeConn{liveConn: lc, ex: u.Exchange})
		} else {
			r.conns = append(r.conns, &lc)
		}
	}
	r.state.Store(r.emptyState())
	r.server = r.newServer()
	return r, nil
}

// Start connects the upstreams and builds the first catalog. It waits up to
// ReadyTimeout for every upstream to be ready, then publishes whatever is
// listed; upstreams that come up later join through a rebuild. The
// runtime's goroutines stop when ctx is cancelled or Close is called.
func (r *Runtime) Start(ctx context.Context) error {
	store, err := r.openStore()
	if err != nil {
		return err
	}
	r.store = store
	if err := r.pinRegistry(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.life = ctx
	r.relay.base = ctx
	if err := r.openSafety(ctx); err != nil {
		return err
	}
	if !r.opts.FirewallOff {
		r.fw = firewall.New(firewall.Options{Store: store, Counter: r.cards.Counter(), MaxInlineTokens: r.opts.MaxInlineTokens})
	}
	for _, c := range r.clients {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			_ = c.Run(ctx)
		}()
	}
	wait, cancelWait := context.WithTimeout(ctx, r.opts.ReadyTimeout)
	for _, c := range r.clients {
		if err := c.WaitReady(wait); err != nil {
			r.log.Warn("upstream not ready; it joins the catalog when it comes up", "upstream", c.Name(), "err", c.State().Err)
		}
	}
	cancelWait()
	r.mu.Lock()
	for _, c := range r.conns {
		r.dirty[c.name()] = true
	}
	r.mu.Unlock()
	if err := r.rebuild(ctx); err != nil {
		cancel()
		r.wg.Wait()
		return err
	}
	if w := r.state.Load().exp.clashes; len(w) > 0 {
		cancel()
		r.wg.Wait()
		return fmt.Errorf("direct exposure: name collision: %s", strings.Join(w, "; "))
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.rebuildLoop(ctx)
	}()
	return nil
}

// Close stops the upstreams (reaping child processes) and every goroutine
// of the runtime.
func (r *Runtime) Close() error {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retired != nil {
		r.retired.Close()
		r.retired = nil
	}
	if st := r.state.Load(); st != nil && st.router != nil {
		st.router.Close()
	}
	var errs []error
	errs = append(errs, r.closeSafety())
	if r.idem != nil {
		errs = append(errs, r.idem.Close())
		r.idem = nil
	}
	if r.store != nil {
		errs = append(errs, r.store.Close())
		r.store = nil
	}
	return errors.Join(errs...)
}

// Server returns the MCP server that serves the runtime's surface; connect
// sessions to it with any go-sdk transport.
func (r *Runtime) Server() *mcp.Server { return r.server }

// Snapshot returns the catalog currently served.
func (r *Runtime) Snapshot() *catalog.Snapshot { return r.state.Load().snap }

// markDirty schedules a re-listing of one upstream.
func (r *Runtime) markDirty(name string) {
	r.mu.Lock()
	r.dirty[name] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Rebuilt returns a channel closed at the next completed rebuild.
func (r *Runtime) Rebuilt() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rebuilt
}
