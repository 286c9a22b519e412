package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/toolid"
)

// ServeStdio serves one MCP session over stdin/stdout until the client
// disconnects or ctx is cancelled.
func (r *Runtime) ServeStdio(ctx context.Context) error {
	return r.serveTransport(ctx, &mcp.StdioTransport{})
}

// serveTransport serves one MCP session over t; every call t carries gets
// a receipt, those the go-sdk refuses before dispatch too.
func (r *Runtime) serveTransport(ctx context.Context, t mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.start.failed:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := r.server.Run(ctx, recordingTransport{Transport: t, rec: &r.rec})
	if ferr := r.Err(); ferr != nil {
		return ferr
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Handler returns the HTTP surface: streamable MCP at path, /healthz and
// /metrics.
func (r *Runtime) Handler(path string) http.Handler {
	if path == "" {
		path = "/mcp"
	}
	mux := http.NewServeMux()
	// A configured host allow-list replaces the go-sdk's loopback rule
	// (a gateway behind a proxy on loopback is reached by its public name).
	// One endpoint for every revision: sessions up to 2025-11-25, and
	// sessionless requests at 2026-07-28 (runtime/protocol routes them).
	var mcpHandler http.Handler = protocol.NewRouter(r.server,
		protocol.RouterOptions{DisableLocalhostProtection: len(r.cfg.Listen.AllowedHosts) > 0, SessionTimeout: time.Duration(r.cfg.Listen.SessionIdleTimeout),
			Stateful: r.sessionRoom, Stateless: func(h http.Handler) http.Handler {
				// The tasks extension's routing header (tasks.go).
				return protocol.TaskHeaders(0, r.requestRoom(h))
			}})
	if r.verifier != nil {
		// Every request is authenticated before MCP routing (spec 001
		// MUST 2); the middleware also removes the Authorization header.
		mcpHandler = r.verifier.Middleware(identity.MiddlewareOptions{OnDeny: r.denyReceipt,
			OnAllow: func(req *http.Request, p identity.Principal) { r.rec.tags.authenticated(req.Header, p) }})(mcpHandler)
	} else {
		mcpHandler = stripAuthorization(mcpHandler)
	}
	mux.Handle(path, r.rec.catchRefusals(hostGuard(r.cfg.Listen.AllowedHosts, r.cfg.Listen.AllowedOrigins, mcpHandler)))
	// The other endpoints get the same Host and Origin checks as /mcp.
	guard := func(h http.Handler) http.Handler {
		return loopbackGuard(r.cfg.Listen.AllowedHosts, hostGuard(r.cfg.Listen.AllowedHosts, r.cfg.Listen.AllowedOrigins, h))
	}
	if r.admin != nil {
		// The admin API authenticates on its own (admin token or claim).
		mux.Handle(admin.Prefix, guard(r.admin))
	}
	if r.console != nil {
		mux.Handle(admin.ConsolePrefix, guard(r.console))
	}
	mux.Handle("/healthz", guard(http.HandlerFunc(r.healthz)))
	// The public keys of capability tokens, for holders and relying
	// parties that verify them.
	mux.Handle(JWKSPath, hostGuard(r.cfg.Listen.AllowedHosts, r.cfg.Listen.AllowedOrigins, http.HandlerFunc(r.serveJWKS)))
	mux.Handle("/metrics", guard(r.guardMetrics(promhttp.HandlerFor(r.met.reg, promhttp.HandlerOpts{Registry: r.met.reg}))))
	return mux
}

// health is the /healthz body. Only Status is given to anyone; the rest
// names the fleet and is given to a request with the metrics or the admin
// token.
type health struct {
	// Status is ok, starting (the first catalog is not published yet) or
	// degraded (an upstream failed).
	Status    string           `json:"status"`
	Catalog   map[string]int   `json:"catalog"`
	Gen       uint64           `json:"generation"`
	Upstreams []upstreamHealth `json:"upstreams"`
	// State is the name of the state backend ("memory", "embedded",
	// "redis"); "" before Start.
	State string `json:"state"`
}

type upstreamHealth struct {
	Name string `json:"name"`
	// Status is the client's connection status (connecting, ready, down,
	// closed); State is its phase: starting (no attempt finished yet),
	// ready, or failed (Error says why; it is retried).
	Status string `json:"status"`
	State  string `json:"state"`
	// Protocol is the MCP revision negotiated with the upstream.
	Protocol string `json:"protocol,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (r *Runtime) healthz(w http.ResponseWriter, req *http.Request) {
	st := r.state.Load()
	h := health{Status: "ok", Gen: st.gen, Catalog: map[string]int{}, Upstreams: []upstreamHealth{}}
	if b := r.backend; b != nil {
		h.State = b.Name()
	}
	for _, k := range []toolid.Kind{toolid.KindTool, toolid.KindResource, toolid.KindPrompt} {
		h.Catalog[string(k)] = len(st.snap.Items(k))
	}
	for _, e := range r.upstreams() {
		if e.client == nil {
			continue
		}
		s := e.client.State()
		u := upstreamHealth{Name: s.Name, Status: string(s.Status), Protocol: s.Protocol}
		u.State, u.Error = e.health.get()
		if u.State == phaseFailed {
			h.Status = "degraded"
		}
		h.Upstreams = append(h.Upstreams, u)
	}
	select {
	case <-r.start.published:
	default:
		h.Status = phaseStarting
	}
	w.Header().Set("Content-Type", "application/json")
	if !r.info.opens(req) {
		_ = json.NewEncoder(w).Encode(struct {
			Status string `json:"status"`
		}{h.Status})
		return
	}
	_ = json.NewEncoder(w).Encode(h)
}

// HTTPOptions configure the HTTP listener.
type HTTPOptions struct {
	Addr string // host:port; port 0 picks a free port
	// Listener, when set, is served instead of listening on Addr (the
	// caller binds it first, so that a busy port fails before anything
	// starts); ServeHTTP closes it.
	Listener net.Listener
	Path     string // MCP endpoint path (default /mcp)
	// CertFile and KeyFile, when both set, serve HTTPS.
	CertFile, KeyFile string
	// Ready, when non-nil, receives the bound address once listening.
	Ready func(net.Addr)
}

// ServeHTTP serves Handler(o.Path) until ctx is cancelled, then shuts down
// gracefully.
func (r *Runtime) ServeHTTP(ctx context.Context, o HTTPOptions) error {
	if r.verifier == nil {
		r.log.Warn("HTTP without auth: callers are not authenticated and each session is its own anonymous principal; configure auth.issuers")
	}
	ln := o.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", o.Addr); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: r.Handler(o.Path), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	if o.Ready != nil {
		o.Ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() {
		if o.CertFile != "" || o.KeyFile != "" {
			errc <- srv.ServeTLS(ln, o.CertFile, o.KeyFile)
			return
		}
		errc <- srv.Serve(ln)
	}()
	var failed error
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	case <-r.start.failed:
		failed = r.start.err
	}
	// Stop accepting and let calls in flight finish; open event streams
	// of idle sessions never end by themselves, so after a grace period
	// the sessions are closed, which ends them.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	var err error
	select {
	case err = <-shut:
	case <-time.After(shutdownGrace):
		for ss := range r.server.Sessions() {
			_ = ss.Close()
		}
		err = <-shut
	}
	if err != nil {
		_ = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return failed
}

// shutdownGrace is how long calls in flight get to finish at shutdown
// before the sessions are closed.
const shutdownGrace = time.Second
