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
	"os"
	"os/user"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-mcp/quiver/runtime/config"

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
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/sessionlimit"
	qstate "github.com/quiver-mcp/quiver/runtime/state"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Deps is what a Runtime needs that is not configuration: where it logs,
// how it reads the environment, and what tests and benchmarks supply in
// memory instead of from files.
type Deps struct {
	// Logger receives the runtime's log (nil: discarded).
	Logger *slog.Logger
	// Cards builds ChoiceCards; nil builds the default cl100k_base builder.
	Cards *choicecard.Builder
	// Getenv resolves the secrets the configuration names (credentials,
	// environment references, auth secrets, the admin token); nil reads
	// the process environment. Their values never appear in errors.
	Getenv func(string) (string, bool)
	// Version is reported in the MCP server info.
	Version string
	// ReceiptsCopy, when set, receives a copy of every receipt line;
	// without it receipts.stdout copies them to stdout over HTTP.
	ReceiptsCopy io.Writer
	// Policy is a fixed policy, used when the configuration names no
	// policy file (tests).
	Policy *policy.Policy
	// Registry loads the tool_registry manifests instead of the
	// configuration's registry globs (tests). Start loads them once and
	// pins the result in the connector layer; every catalog rebuild loads
	// them again for the front door and the cards, so a registry changed
	// while quiver runs is refused (REGISTRY_VERSION_MISMATCH) until a
	// reload (Apply) or a restart pins it.
	Registry func() (*guard.Registry, error)
	// Catalogs are static catalogs by upstream name, served instead of
	// the upstream's catalog file or transport (tests, benchmarks).
	Catalogs map[string]catalog.Source
	// State is the state backend (tests inject one, and may share it
	// between runtimes to stand for replicas); the runtime does not close
	// it. Without it Start opens the backend the configuration names and
	// Close closes it.
	State qstate.Backend
}

// Runtime serves one gateway. Create it with New, then Start it, serve
// MCP sessions with Server or ServeStdio/Handler, and Close it.
type Runtime struct {
	cfg  *config.Config
	deps Deps
	// localName is the principal name of stdio sessions: auth.local.sub,
	// else the process owner's user name, else "local".
	localName string
	// The settings of the configuration in the types of the packages
	// that enforce them.
	retry      controls.RetryPolicy
	schema     catalog.SchemaLimits
	adminToken []byte
	// info opens the detail of /metrics and /healthz.
	info       infoTokens
	adminClaim *admin.Claim
	// fleet holds the enabled upstream entries in force (Apply replaces
	// it).
	fleet atomic.Pointer[fleet]

	log    *slog.Logger
	cards  *choicecard.Builder
	server *mcp.Server
	met    *metrics

	// backend is the state backend opened (or injected) at Start; kv is
	// its KV as the kinds of state made in New see it (ErrUnavailable
	// until Start). ownBackend: Close closes backend.
	backend    qstate.Backend
	ownBackend bool
	kv         *startedKV

	store artifacts.Store
	fw    *firewall.Firewall

	// The execute path: the registry pinned at Start (and by Apply) with
	// its connector layer and idempotency records, the dispatch controls
	// (the rate limiter is replaced by Apply), and the compiled tool_call
	// schema.
	pins          atomic.Pointer[pinned]
	cache         *controls.Cache[*mcp.CallToolResult]
	limits        atomic.Pointer[controls.RateLimiter]
	callSchema    *jsonschema.Schema
	executeSchema json.RawMessage

	state atomic.Pointer[state]
	// buildMu serializes catalog rebuilds; applyMu serializes Apply.
	buildMu, applyMu sync.Mutex
	// start tracks the first catalog and the upstreams' first attempts.
	start startup

	mu       sync.Mutex // guards listings and dirty
	listings map[string]catalog.Source
	// templates are the resource templates of each upstream (direct mode).
	templates map[string][]*mcp.ResourceTemplate
	dirty     map[string]bool
	wake      chan struct{}  // rebuild trigger, capacity 1
	rebuilt   chan struct{}  // closed and replaced after every rebuild
	retired   *router.Router // the previous state's router, closed at the next swap

	// heard holds the kinds of list (upstream.KindTools, ...) an
	// upstream said changed since the last swap (see reannounce).
	heard map[string]bool

	sessions sessionStates
	// sessionLimit bounds the HTTP listener's MCP sessions.
	sessionLimit *sessionlimit.Limiter

	// Two-way forwarding: the relay routes what upstreams send during
	// calls, affinity holds the per-client upstream sessions, levels and
	// subs what clients asked of the upstreams; life is Start's context.
	relay    *relay
	affinity affinity
	// mrtr relays upstreams' input requests to sessionless callers; its
	// sealer is made at Start.
	mrtr   *mrtr
	levels logLevels
	subs   subscriptions
	life   context.Context

	// The safety profile: the verifier (nil without issuers), the
	// authorizer (incident state, policy, approvals), the recorder
	// (receipts, metrics and logs of every request), the admin API and
	// the operator console.
	verifier *identity.Verifier
	auth     authorizer
	rec      recorder
	admin    http.Handler
	console  http.Handler

	// caps issues and checks capability tokens (spec 004); opened by
	// Start.
	caps *capabilities

	// live is the configuration in force after the last Apply (nil: cfg).
	live atomic.Pointer[config.Config]
	// policyWatch ends the watch of the policy file in force (Start and
	// Apply, under applyMu).
	policyWatch context.CancelFunc

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New validates cfg and builds a Runtime. cfg is not changed; the Runtime
// keeps a copy of it that shares its lists and maps, so the caller must not
// change those afterwards. Secrets and static catalog files are read here.
// It connects nothing: Start does.
func New(cfg *config.Config, deps Deps) (*Runtime, error) {
	if cfg == nil {
		return nil, errors.New("runtime: no configuration")
	}
	c := *cfg
	if err := validate(&c); err != nil {
		return nil, err
	}
	if deps.Getenv == nil {
		deps.Getenv = os.LookupEnv
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cards := deps.Cards
	if cards == nil {
		var err error
		if cards, err = choicecard.NewDefaultBuilder(); err != nil {
			return nil, err
		}
	}
	r := &Runtime{
		cfg:       &c,
		deps:      deps,
		localName: c.Auth.Local.Sub,
		retry: controls.RetryPolicy{MaxAttempts: c.Retry.MaxAttempts, BaseDelay: time.Duration(c.Retry.BaseDelay),
			MaxDelay: time.Duration(c.Retry.MaxDelay), Jitter: c.Retry.Jitter, RetryableCodes: c.Retry.RetryableCodes},
		schema:    catalog.SchemaLimits{MaxBytes: int(c.Schema.MaxBytes), MaxDepth: c.Schema.MaxDepth, MaxProperties: c.Schema.MaxProperties},
		log:       log,
		cards:     cards,
		met:       newMetrics(),
		listings:  map[string]catalog.Source{},
		templates: map[string][]*mcp.ResourceTemplate{},
		dirty:     map[string]bool{},
		wake:      make(chan struct{}, 1),
		rebuilt:   make(chan struct{}),
		relay:     newRelay(),
		kv:        &startedKV{},
	}
	r.mrtr = &mrtr{r: r}
	r.rec = recorder{log: log, met: r.met, auth: &r.auth}
	r.sessionLimit = sessionlimit.New(sessionlimit.Limits{PerPrincipal: c.Listen.Sessions.MaxPerPrincipal, Total: c.Listen.Sessions.MaxTotal})
	r.met.sessionsOpen(r.sessionLimit.Open)
	if r.localName == "" {
		// The process owner is the principal of a stdio session: known
		// only when quiver runs, so not a default of the file.
		r.localName = "local"
		if u, err := user.Current(); err == nil && u.Username != "" {
			r.localName = u.Username
		}
	}
	if len(c.Expose.Direct) > 0 && c.Mode == config.ModeDirect {
		log.Warn("expose.direct has no effect in direct mode, which lists every tool", "mode", c.Mode)
	}
	if err := r.initAdmin(); err != nil {
		return nil, err
	}
	if err := r.initInfoTokens(); err != nil {
		return nil, err
	}
	r.sessions.init()
	if err := r.initExecute(); err != nil {
		return nil, err
	}
	if err := r.initIdentity(); err != nil {
		return nil, err
	}
	r.start.init()
	var entries []*upstreamEntry
	for i := range c.Upstreams {
		if u := &c.Upstreams[i]; u.Enabled {
			e, err := r.newUpstream(u)
			if err != nil {
				return nil, err
			}
			entries = append(entries, e)
		}
	}
	r.fleet.Store(newFleet(entries))
	r.state.Store(r.emptyState())
	r.server = r.newServer()
	return r, nil
}

// validate refuses what a configuration built in code (rather than loaded,
// which config checks) could get wrong.
func validate(c *config.Config) error {
	switch c.Mode {
	case config.ModeGateway, config.ModeProxy, config.ModeDirect:
	default:
		return fmt.Errorf("runtime: unknown mode %q", c.Mode)
	}
	switch c.Environment {
	case guard.EnvProd, guard.EnvDev:
	default:
		return fmt.Errorf("runtime: unknown environment %q", c.Environment)
	}
	if c.Browse.TopK < 1 || c.Browse.TopK > router.MaxTopK {
		return fmt.Errorf("runtime: top_k %d outside 1..%d", c.Browse.TopK, router.MaxTopK)
	}
	if c.Browse.MaxChildren < 1 {
		return fmt.Errorf("runtime: max_children %d is not positive", c.Browse.MaxChildren)
	}
	if c.Timing.CallTimeout <= 0 || c.Timing.ReadyTimeout <= 0 {
		return fmt.Errorf("runtime: call and ready timeouts must be positive (config.DefaultTiming)")
	}
	if err := c.CheckTransport(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, u := range c.Upstreams {
		if u.Name == "" {
			return errors.New("runtime: an upstream has no name")
		}
		if seen[u.Name] {
			return fmt.Errorf("runtime: upstream %q configured twice", u.Name)
		}
		seen[u.Name] = true
		// The request path reads these as they are (receipts, policy
		// input); config.NewUpstream sets them.
		switch u.TrustLevel {
		case config.TrustInternal, config.TrustVerified, config.TrustCommunity, config.TrustUnknown:
		default:
			return fmt.Errorf("runtime: upstream %q: unknown trust level %q", u.Name, u.TrustLevel)
		}
		switch u.Risk {
		case config.RiskLow, config.RiskMedium, config.RiskHigh, config.RiskCritical:
		default:
			return fmt.Errorf("runtime: upstream %q: unknown risk %q", u.Name, u.Risk)
		}
	}
	return nil
}

// initAdmin resolves the admin API's token and claim.
func (r *Runtime) initAdmin() error {
	a := r.cfg.Admin
	if a.TokenEnv != "" {
		tok, ok := r.deps.Getenv(a.TokenEnv)
		if !ok || tok == "" {
			return fmt.Errorf("admin.token_env: environment variable %s is not set", a.TokenEnv)
		}
		r.adminToken = []byte(tok)
	}
	if cl := a.Claim; cl != nil {
		if len(r.cfg.Auth.Issuers) == 0 {
			return fmt.Errorf("admin.claim needs auth.issuers to verify administrators' tokens")
		}
		r.adminClaim = &admin.Claim{Name: cl.Name, Value: cl.Value}
	}
	return nil
}

// Start opens the state backend and the safety stores, launches the
// upstreams and returns without waiting for them: the first catalog is
// built in the background once every upstream is ready or has failed its
// first attempt, or after Timing.ReadyTimeout, whichever comes first, and
// upstreams that come up later join through a rebuild. Requests that read
// the catalog wait for that first catalog (Published); initialize and
// /healthz never wait. A first catalog that cannot be served (a direct
// exposure name collision) fails the runtime: Failed is closed and Err
// says why. The runtime's goroutines stop when ctx is cancelled or Close
// is called.
func (r *Runtime) Start(ctx context.Context) error {
	backend, owned, err := r.openState(ctx)
	if err != nil {
		return err
	}
	r.backend, r.ownBackend = backend, owned
	if owned && r.cfg.StateDir != "" {
		if err := r.importLegacy(ctx, backend.KV()); err != nil {
			return err
		}
	}
	r.kv.set(backend.KV())
	store := backend.Artifacts()
	r.store = store
	r.log.Info("state backend opened", "backend", backend.Name())
	key, err := sealingKey(ctx, r.kv)
	if err != nil {
		return err
	}
	if r.mrtr.seal, err = protocol.NewSealer(key, protocol.SealerOptions{Redeemed: protocol.KVRedeemed{KV: r.kv}}); err != nil {
		return err
	}
	if r.mrtr.holds, err = protocol.NewHolds(protocol.HoldOptions{Timeout: time.Duration(r.cfg.Listen.MRTRHold)}); err != nil {
		return err
	}
	pn, err := r.pinRegistry(r.cfg.Registry, r.upstreams(), r.cfg)
	if err != nil {
		return err
	}
	r.pins.Store(pn)
	ctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.life = ctx
	r.relay.base = ctx
	if err := r.openSafety(ctx); err != nil {
		return err
	}
	if r.cfg.Firewall.Enabled {
		r.fw = firewall.New(firewall.Options{Store: store, Counter: r.cards.Counter(), MaxInlineTokens: r.cfg.Firewall.MaxInlineTokens})
	}
	for _, e := range r.upstreams() {
		r.launch(e)
	}
	r.wg.Go(func() { r.warmUp(ctx) })
	r.wg.Go(func() { r.watchRegistry(ctx) })
	return nil
}

// Close stops the upstreams (reaping child processes) and every goroutine
// of the runtime.
func (r *Runtime) Close() error {
	if r.cancel != nil {
		r.cancel()
	}
	if r.mrtr.holds != nil {
		// Held upstream calls end before the upstream sessions they use.
		r.mrtr.holds.Close()
	}
	r.wg.Wait()
	r.start.publish()
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
	if pn := r.pins.Load(); pn != nil {
		// The idempotency records live in the backend closed below.
		r.pins.Store(&pinned{connector: pn.connector, globs: pn.globs})
	}
	r.store = nil
	r.kv.set(nil)
	if r.backend != nil && r.ownBackend {
		errs = append(errs, r.backend.Close())
	}
	r.backend = nil
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
