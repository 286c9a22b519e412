//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated in protocol 2026-07-28 only; upstreams on earlier protocols (all Node servers) still use them.

// Package upstream keeps one supervised MCP client connection to one upstream
// MCP server, over stdio (a child process), streamable HTTP or legacy SSE.
//
// A Client is created with New and driven by Run, which connects, watches
// the session, and reconnects with exponential backoff and jitter whenever
// the connection fails or the session ends (the child died, the HTTP server
// went away). Calls (ListTools, CallTool, ReadResource, ...) use the current
// session and fail with an *Error classified into the spec 003 §3.4
// upstream taxonomy: UPSTREAM_TIMEOUT, UPSTREAM_UNAVAILABLE, AUTH_FAILED,
// PERMISSION_DENIED, RATE_LIMITED or UPSTREAM_ERROR. A tool's own isError
// result is returned as a result, not as an error.
//
// Credential boundary: an HTTP upstream receives Spec.Headers (resolved by
// the caller for this upstream only) plus what the MCP transport itself
// sends; nothing from any downstream client is ever forwarded. A stdio child
// gets a minimal environment plus Spec.Env, and runs in Spec.Sandbox: its
// command comes from runtime/sandbox.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/sandbox"
)

// Supervisor backoff parameters.
const (
	backoffBase   = 250 * time.Millisecond
	backoffCap    = 30 * time.Second
	healthyPeriod = 10 * time.Second // a session that lived this long resets the backoff
	maxListPages  = 1000
	pingTimeout   = 10 * time.Second
	drainTimeout  = 200 * time.Millisecond // how long teardown lets cancelled calls unwind
)

// List kinds passed to Options.OnListChanged.
const (
	KindTools     = "tools"
	KindResources = "resources"
	KindPrompts   = "prompts"
)

// Status is the coarse connection status of a Client.
type Status string

// Statuses reported in State.
const (
	StatusConnecting Status = "connecting" // starting the server / handshaking (also before Run)
	StatusReady      Status = "ready"      // a live session serves calls
	StatusDown       Status = "down"       // the last attempt failed or the session ended; waiting to retry
	StatusClosed     Status = "closed"     // Run returned or Close was called
)

// State is a snapshot of a Client's connection state.
type State struct {
	Name     string    // Spec.Name
	Status   Status    // current status
	Err      error     // why the client is down or closed (nil when ready); an *Error when classified
	Since    time.Time // when Status was entered
	Connects int       // successful connects so far (a reconnect makes it > 1)
	PID      int       // process id of the stdio child while ready, else 0
	// Protocol is the MCP revision negotiated with the upstream while
	// ready ("" otherwise).
	Protocol string
}

// Options are the hooks of a Client. All are optional. Hooks are called from
// the Client's goroutines and must not block for long; OnState must not
// call back into the Client's waiting methods (WaitReady).
type Options struct {
	// Logger receives the Client's logs, each line of a stdio child's
	// stderr, and the upstream's log notifications (default slog.Default()).
	Logger *slog.Logger
	// OnListChanged is called with KindTools, KindResources or KindPrompts
	// when the upstream announces a list change, and for all three after
	// every successful (re)connect, so a catalog refreshes after a restart.
	// Calls are coalesced and made from one goroutine, so the hook may call
	// ListTools etc.
	OnListChanged func(kind string)
	// OnState is called on every state transition.
	OnState func(State)
	// OnProgress receives the upstream's progress notifications; callers
	// correlate them through the progress token they put in the call's _meta.
	OnProgress func(*mcp.ProgressNotificationParams)
	// OnLog receives the upstream's notifications/message; when nil they are
	// logged through Logger.
	//lint:ignore SA1019 deprecated in protocol 2026-07-28 only; servers on 2025-11-25 (all Node servers) still log this way.
	OnLog func(*mcp.LoggingMessageParams)
	// OnResourceUpdated receives the upstream's
	// notifications/resources/updated for resources subscribed with
	// Subscribe.
	OnResourceUpdated func(*mcp.ResourceUpdatedNotificationParams)

	// OnCreateMessage answers the upstream's sampling/createMessage
	// requests, and OnElicit its elicitation/create requests. The client
	// announces the sampling (elicitation) capability only when the hook is
	// set, with Sampling (Elicitation) as its value when that is set. Under
	// protocol 2025-11-25 the hooks run on the connection's context; a
	// multi-round-trip upstream (2026-07-28) has them run on the context of
	// the call that needs the answer.
	//lint:ignore SA1019 sampling is deprecated in protocol 2026-07-28 only.
	OnCreateMessage func(context.Context, *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error)
	Sampling        *mcp.SamplingCapabilities
	OnElicit        func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	Elicitation     *mcp.ElicitationCapabilities
	// OnListRoots answers the upstream's roots/list requests, in the
	// middle of a call or as an input request, instead of the client's
	// own (empty) root set. The roots capability is not announced for
	// it: an upstream that asks anyway is answered with the roots of the
	// client whose call it serves.
	OnListRoots func(context.Context, *mcp.ListRootsRequest) (*mcp.ListRootsResult, error)
}

// maxIdleConnsPerUpstream bounds the idle HTTP connections kept to one
// upstream.
const maxIdleConnsPerUpstream = 64

// Client is a supervised MCP client for one upstream server. Its methods
// are safe for concurrent use.
type Client struct {
	spec    Spec
	opts    Options
	logger  *slog.Logger
	mc      *mcp.Client
	httpTr  *http.Transport // owned; idle connections closed when sessions end
	httpCli *http.Client
	// launcher builds a stdio child's command (Spec.Launcher or a default).
	launcher *sandbox.Launcher

	connectTimeout, callTimeout, grace, health time.Duration

	running atomic.Bool
	runDone chan struct{} // closed when Run returns

	mu        sync.Mutex
	state     State
	cur       *session
	ready     chan struct{} // closed while Status == ready
	changed   chan struct{} // closed and replaced on every transition
	closed    bool
	runCancel context.CancelFunc
	pending   map[string]bool // coalesced list-changed kinds

	events chan struct{} // wakes the event dispatcher (cap 1)

	// taskKey is the _meta key under which the connection hands over an
	// answer with a task (see taskConn).
	taskKey string
}

// session is one live MCP session.
type session struct {
	cs     *mcp.ClientSession
	ctx    context.Context         // cancelled when the session is torn down
	cancel context.CancelCauseFunc // cancels ctx (and every call bound to it)
	ended  chan struct{}           // closed when the MCP connection is done
	endErr error                   // cs.Wait's result; valid after ended

	brokenOnce sync.Once
	broken     chan struct{} // closed by markBroken
	brokenErr  error

	calls atomic.Int64 // calls in flight on this session

	// received and handled count the relayed notifications read from the
	// connection and handled by the client (see drain).
	received, handled atomic.Int64

	cmd    *exec.Cmd        // stdio only
	proc   *sandbox.Process // stdio only: what the command needs until it is done
	stderr *lineLogger      // stdio only
}

func (s *session) markBroken(err error) {
	s.brokenOnce.Do(func() {
		s.brokenErr = err
		close(s.broken)
	})
}

func (s *session) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// New returns a Client for spec. It does nothing until Run is called. An
// invalid spec is reported by Run (and by spec.Validate).
func New(spec Spec, opts Options) *Client {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("upstream", spec.Name)
	c := &Client{
		spec:           spec,
		opts:           opts,
		logger:         logger,
		connectTimeout: orDefault(spec.ConnectTimeout, DefaultConnectTimeout),
		callTimeout:    orDefault(spec.CallTimeout, DefaultCallTimeout),
		grace:          orDefault(spec.TerminateGrace, DefaultTerminateGrace),
		runDone:        make(chan struct{}),
		ready:          make(chan struct{}),
		changed:        make(chan struct{}),
		pending:        map[string]bool{},
		events:         make(chan struct{}, 1),
		launcher:       spec.Launcher,
	}
	if c.launcher == nil {
		c.launcher = sandbox.New(sandbox.Options{Logger: logger})
	}
	switch {
	case spec.HealthInterval > 0:
		c.health = spec.HealthInterval
	case spec.HealthInterval == 0 && len(spec.Command) == 0:
		c.health = DefaultHealthInterval
	}
	c.state = State{Name: spec.Name, Status: StatusConnecting, Since: time.Now()}
	if len(spec.Command) == 0 {
		endpoint := spec.URL
		if endpoint == "" {
			endpoint = spec.SSE
		}
		u, _ := url.Parse(endpoint) // validated by Run
		base, _ := http.DefaultTransport.(*http.Transport)
		if base != nil {
			c.httpTr = base.Clone()
		} else {
			c.httpTr = &http.Transport{}
		}
		// Concurrent calls each hold a connection; with the default of 2
		// idle connections per host, a busy gateway opens and closes a TCP
		// connection for most calls.
		c.httpTr.MaxIdleConnsPerHost = maxIdleConnsPerUpstream
		c.taskKey = newTaskKey()
		c.httpCli = &http.Client{Transport: &headerTransport{
			base: c.httpTr, origin: originOf(u), headers: spec.Headers.Clone(), deleteTimeout: c.grace,
			name: spec.Name, bearer: spec.Bearer, count: c.countReceived, taskKey: c.taskKey,
		}}
	}
	co := &mcp.ClientOptions{
		Logger:                     logger,
		Capabilities:               &mcp.ClientCapabilities{},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { c.listChanged(KindTools) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { c.listChanged(KindResources) },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { c.listChanged(KindPrompts) },
		//lint:ignore SA1019 see Options.OnLog.
		LoggingMessageHandler:       c.onLog,
		ProgressNotificationHandler: c.onProgress,
		ResourceUpdatedHandler:      c.onResourceUpdated,
		// Input requests of an upstream's input_required result are
		// answered (or relayed) by rounds, not by the go-sdk's own loop.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	if opts.OnCreateMessage != nil {
		//lint:ignore SA1019 see Options.OnCreateMessage.
		co.CreateMessageWithToolsHandler = opts.OnCreateMessage
		co.Capabilities.Sampling = opts.Sampling
	}
	if opts.OnElicit != nil {
		co.ElicitationHandler = opts.OnElicit
		co.Capabilities.Elicitation = opts.Elicitation
	}
	c.mc = mcp.NewClient(&mcp.Implementation{Name: "quiver", Version: "0"}, co)
	c.mc.AddReceivingMiddleware(c.countHandled)
	if c.taskKey == "" {
		c.taskKey = newTaskKey()
	}
	if err := addTaskMethods(c.mc); err != nil {
		// Only a name that shadows a standard method fails, which
		// these do not.
		panic(err)
	}
	if opts.OnElicit != nil {
		// The go-sdk client checks a form's requestedSchema against its own
		// reading of the elicitation schema rules before its handler runs,
		// and refuses schemas that other SDKs send and the specification
		// allows (a titled multi-select with "type" beside "anyOf", for
		// one). A gateway passes the request on as it came, so the hook
		// takes elicitation/create ahead of that check; the client that
		// answers is the one to judge the schema.
		c.mc.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if er, ok := req.(*mcp.ElicitRequest); ok && method == "elicitation/create" && er.Params != nil {
					return opts.OnElicit(ctx, er)
				}
				return next(ctx, method, req)
			}
		})
	}
	if opts.OnListRoots != nil {
		c.mc.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if lr, ok := req.(*mcp.ListRootsRequest); ok && method == "roots/list" {
					return opts.OnListRoots(ctx, lr)
				}
				return next(ctx, method, req)
			}
		})
	}
	return c
}

// Name returns Spec.Name.
func (c *Client) Name() string { return c.spec.Name }

// State returns the current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Ready returns a channel that is closed while the client is ready. A new
// channel is handed out after the client leaves the ready state, so call
// Ready again after each wake-up.
func (c *Client) Ready() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// WaitReady blocks until the client is ready, it is closed (ErrClosed), or
// ctx ends (the context error, with the last connection error attached).
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		c.mu.Lock()
		st, changed := c.state, c.changed
		c.mu.Unlock()
		switch st.Status {
		case StatusReady:
			return nil
		case StatusClosed:
			if st.Err != nil && !errors.Is(st.Err, ErrClosed) {
				return fmt.Errorf("%w: %w", ErrClosed, st.Err)
			}
			return ErrClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if st.Err != nil {
				return fmt.Errorf("upstream %q: %w (last error: %w)", c.spec.Name, context.Cause(ctx), st.Err)
			}
			return fmt.Errorf("upstream %q: %w", c.spec.Name, context.Cause(ctx))
		}
	}
}

// InitializeResult returns the handshake result of the current session
// (server name and version, capabilities, protocol version, instructions),
// or nil when not connected.
func (c *Client) InitializeResult() *mcp.InitializeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return nil
	}
	return c.cur.cs.InitializeResult()
}

// ServerInfo returns the current session's server implementation (name and
// version), or nil when not connected or not reported.
func (c *Client) ServerInfo() *mcp.Implementation {
	if res := c.InitializeResult(); res != nil {
		return res.ServerInfo
	}
	return nil
}

// Close stops Run (if running), closes the session, reaps the child and
// waits for Run to return. Later calls fail with ErrClosed. Close is
// idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cancel := c.runCancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-c.runDone
	}
	c.mu.Lock()
	var hook func()
	if c.state.Status != StatusClosed {
		hook = c.setStateLocked(StatusClosed, ErrClosed, nil)
	}
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return nil
}

// Run supervises the upstream until ctx is done or Close is called: it
// connects (bounded by ConnectTimeout), and after a failure or the end of a
// session reconnects with exponential backoff and jitter (250 ms doubling to
// 30 s, reset once a session stayed up 10 s). It returns nil after closing
// the session and reaping the child process; it returns at once with a
// *SpecError for an invalid spec, ErrAlreadyRunning if Run was called
// before (a Client runs once), and ErrClosed after Close. Calls made before
// the first connection completes wait for it (bounded by their timeout).
func (c *Client) Run(ctx context.Context) error {
	if err := c.spec.Validate(); err != nil {
		c.setState(StatusClosed, err, nil)
		return err
	}
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.runCancel = cancel
	c.mu.Unlock()
	defer close(c.runDone)

	var wg sync.WaitGroup
	wg.Go(func() { c.dispatchEvents(ctx) })
	defer wg.Wait()

	backoff := backoffBase
	for ctx.Err() == nil {
		c.setState(StatusConnecting, nil, nil)
		s, err := c.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			c.logger.Warn("upstream connect failed", "err", err, "retry_in", backoff)
			c.setState(StatusDown, err, nil)
			wait := backoff
			var e *Error
			if errors.As(err, &e) && e.RetryAfter > wait {
				wait = min(e.RetryAfter, backoffCap)
			}
			if !sleep(ctx, jitter(wait)) {
				break
			}
			backoff = min(backoff*2, backoffCap)
			continue
		}

		started := time.Now()
		c.setState(StatusReady, nil, s)
		c.logger.Info("upstream ready", "transport", c.spec.transportKind(), "server", serverName(s.cs), "protocol", s.cs.InitializeResult().ProtocolVersion)
		c.listChanged(KindTools, KindResources, KindPrompts)

		reason := c.watch(ctx, s)
		if ctx.Err() != nil {
			c.teardown(s, ErrClosed)
			break
		}
		down := newError(codes.UpstreamUnavailable, fmt.Errorf("%w: %w", ErrSessionEnded, reason))
		c.logger.Warn("upstream session ended", "err", reason)
		c.setState(StatusDown, down, nil)
		c.teardown(s, reason)
		if time.Since(started) >= healthyPeriod {
			backoff = backoffBase
		}
		if !sleep(ctx, jitter(backoff)) {
			break
		}
		backoff = min(backoff*2, backoffCap)
	}
	cancel()
	if c.httpTr != nil {
		c.httpTr.CloseIdleConnections()
	}
	c.setState(StatusClosed, ErrClosed, nil)
	c.logger.Info("upstream client stopped")
	return nil
}

// watch blocks until ctx ends, the session ends, a call reports it broken,
// or a health ping finds the upstream unreachable; it returns the reason.
func (c *Client) watch(ctx context.Context, s *session) error {
	var tick <-chan time.Time
	if c.health > 0 {
		t := time.NewTicker(c.health)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.ended:
			if s.endErr != nil {
				return fmt.Errorf("connection closed: %w", s.endErr)
			}
			return errors.New("connection closed by the upstream")
		case <-s.broken:
			return s.brokenErr
		case <-tick:
			pctx, cancel := context.WithTimeout(s.ctx, min(pingTimeout, c.callTimeout))
			pctx, probe := withProbe(pctx)
			err := s.cs.Ping(pctx, nil)
			cancel()
			if err != nil {
				e := classify(ctx, pctx, probe, s.isEnded(), err)
				c.logger.Debug("upstream ping failed", "err", e)
				if e.Code == codes.UpstreamUnavailable {
					return fmt.Errorf("health ping: %w", e)
				}
			}
		}
	}
}

// connect starts one session.
func (c *Client) connect(ctx context.Context) (*session, error) {
	// The session context is cancelled by teardown, not by ctx: calls in
	// flight must see ErrSessionEnded as the cause. ctx only aborts the
	// connection attempt itself.
	sctx, scancel := context.WithCancelCause(context.WithoutCancel(ctx))
	sctx, probe := withProbe(sctx)
	s := &session{ctx: sctx, cancel: scancel, ended: make(chan struct{}), broken: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { scancel(fmt.Errorf("%w: %w", ErrSessionEnded, ErrClosed)) })
	defer stop()

	var tr mcp.Transport
	switch c.spec.transportKind() {
	case "stdio":
		s.stderr = &lineLogger{logger: c.logger.With("stream", "stderr")}
		proc, err := c.launcher.Command(sctx, sandbox.Spec{Name: c.spec.Name, Argv: c.spec.Command, Env: c.spec.Env,
			Dir: c.spec.Dir, Home: c.spec.Home, Policy: c.spec.Sandbox})
		if err != nil {
			scancel(err)
			return nil, &Error{Code: codes.UpstreamUnavailable, Err: fmt.Errorf("upstream %q: start: %w", c.spec.Name, err)}
		}
		s.proc = proc
		cmd := proc.Cmd
		cmd.Stderr = s.stderr
		cmd.WaitDelay = c.grace
		isolateProcess(cmd)
		s.cmd = cmd
		tr = &mcp.CommandTransport{Command: cmd, TerminateDuration: c.grace}
	case "http":
		tr = &mcp.StreamableClientTransport{Endpoint: c.spec.URL, HTTPClient: c.httpCli}
	default:
		tr = &mcp.SSEClientTransport{Endpoint: c.spec.SSE, HTTPClient: c.httpCli}
	}

	cctx, cancel := context.WithTimeoutCause(sctx, c.connectTimeout, ErrConnectTimeout)
	defer cancel()
	bt := &boundTransport{inner: tr, ctx: sctx, cancel: scancel}
	if s.cmd != nil {
		// Only a stdio connection can be wrapped: the go-sdk's HTTP
		// connections have unexported methods a wrapper would hide
		// (headerTransport rewrites their answers instead).
		bt.taskKey = c.taskKey
		// Over HTTP the event streams are counted by headerTransport.
		bt.received = &s.received
	}
	var so *mcp.ClientSessionOptions
	if c.spec.Protocol != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: c.spec.Protocol}
	}
	cs, err := c.mc.Connect(cctx, bt, so)
	if err != nil {
		e := classify(ctx, cctx, probe, false, err)
		e.Err = fmt.Errorf("upstream %q: connect: %w", c.spec.Name, e.Err)
		scancel(e)
		c.cleanup(s)
		return nil, e
	}
	s.cs = cs
	go func() {
		// Owned by the session: ends when the MCP connection is done, which
		// teardown guarantees by closing the session.
		s.endErr = cs.Wait()
		close(s.ended)
	}()
	return s, nil
}

// teardown cancels the session's calls, closes it (stdin close, then
// SIGTERM, then SIGKILL for a child) and waits until it is done.
func (c *Client) teardown(s *session, cause error) {
	s.cancel(fmt.Errorf("%w: %w", ErrSessionEnded, cause))
	if s.calls.Load() > 0 && !s.isEnded() {
		// The go-sdk sends notifications/cancelled for a cancelled call from
		// a goroutine, and drops it if the connection starts closing first.
		// Let the cancelled calls unwind so the upstream learns about them.
		deadline := time.Now().Add(drainTimeout)
		for s.calls.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.cs.Close() }()
	var err error
	select {
	case err = <-closed:
	case <-time.After(2*c.grace + 5*time.Second):
		c.logger.Warn("upstream session close is slow; killing the process")
		if s.cmd != nil && s.cmd.Process != nil {
			killProcessGroup(s.cmd.Process.Pid)
		}
		err = <-closed
	}
	<-s.ended
	if err != nil {
		c.logger.Debug("upstream session closed", "err", err)
	}
	c.cleanup(s)
}

// cleanup releases what a session leaves behind once its connection is done.
func (c *Client) cleanup(s *session) {
	if s.cmd != nil && s.cmd.Process != nil {
		killProcessGroup(s.cmd.Process.Pid)
	}
	if s.stderr != nil {
		s.stderr.Flush()
	}
	if s.proc != nil {
		s.proc.Close()
	}
	if c.httpTr != nil {
		c.httpTr.CloseIdleConnections()
	}
}

func (c *Client) setState(st Status, err error, s *session) {
	c.mu.Lock()
	hook := c.setStateLocked(st, err, s)
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// setStateLocked records a transition and returns the OnState call to make
// after unlocking (nil if none).
func (c *Client) setStateLocked(st Status, err error, s *session) func() {
	prev := c.state.Status
	c.state.Status, c.state.Err, c.state.Since, c.state.PID, c.state.Protocol = st, err, time.Now(), 0, ""
	c.cur = s
	if st == StatusReady {
		c.state.Connects++
		if s != nil && s.cs != nil && s.cs.InitializeResult() != nil {
			c.state.Protocol = s.cs.InitializeResult().ProtocolVersion
		}
		if s != nil && s.cmd != nil && s.cmd.Process != nil {
			c.state.PID = s.cmd.Process.Pid
		}
		close(c.ready)
	} else if prev == StatusReady {
		c.ready = make(chan struct{})
	}
	close(c.changed)
	c.changed = make(chan struct{})
	if c.opts.OnState == nil {
		return nil
	}
	snapshot := c.state
	return func() { c.opts.OnState(snapshot) }
}

// listChanged queues OnListChanged calls for kinds.
func (c *Client) listChanged(kinds ...string) {
	if c.opts.OnListChanged == nil {
		return
	}
	c.mu.Lock()
	for _, k := range kinds {
		c.pending[k] = true
	}
	c.mu.Unlock()
	select {
	case c.events <- struct{}{}:
	default:
	}
}

// dispatchEvents delivers coalesced list-changed events until ctx ends.
func (c *Client) dispatchEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.events:
		}
		c.mu.Lock()
		var kinds []string
		for _, k := range []string{KindTools, KindResources, KindPrompts} {
			if c.pending[k] {
				kinds = append(kinds, k)
				delete(c.pending, k)
			}
		}
		c.mu.Unlock()
		for _, k := range kinds {
			if ctx.Err() != nil {
				return
			}
			c.opts.OnListChanged(k)
		}
	}
}

func (c *Client) onLog(_ context.Context, req *mcp.LoggingMessageRequest) {
	if req == nil || req.Params == nil {
		return
	}
	if c.opts.OnLog != nil {
		c.opts.OnLog(req.Params)
		return
	}
	level := slog.LevelInfo
	switch req.Params.Level {
	case "debug":
		level = slog.LevelDebug
	case "notice", "info":
	case "warning":
		level = slog.LevelWarn
	default:
		level = slog.LevelError
	}
	c.logger.Log(context.Background(), level, "upstream log", "logger", req.Params.Logger, "data", req.Params.Data)
}

func (c *Client) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if c.opts.OnProgress != nil && req != nil && req.Params != nil {
		c.opts.OnProgress(req.Params)
	}
}

// countHandled is the outermost receiving middleware: it counts the
// relayed notifications the client has finished handling.
func (c *Client) countHandled(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if relayedNotifications[method] {
			c.mu.Lock()
			s := c.cur
			c.mu.Unlock()
			if s != nil && s.cs == req.GetSession() {
				s.handled.Add(1)
			}
		}
		return res, err
	}
}

// countReceived counts a relayed notification read for the current
// session.
func (c *Client) countReceived() {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s != nil {
		s.received.Add(1)
	}
}

// drainTimeoutCall bounds how long a call waits for the notifications that
// preceded its answer.
const drainTimeoutCall = time.Second

// drain waits until the client has handled every relayed notification read
// before now: a call's answer is read after the progress and log
// notifications the server sent before it, but the client hands the answer
// to the caller at once while it handles notifications in a queue of their
// own, so without this a gateway could answer its client before it
// forwarded the notifications that came first.
func (c *Client) drain(ctx context.Context, s *session) {
	want := s.received.Load()
	if s.handled.Load() >= want {
		return
	}
	deadline := time.Now().Add(drainTimeoutCall)
	for wait := 20 * time.Microsecond; s.handled.Load() < want; wait = min(2*wait, 5*time.Millisecond) {
		if ctx.Err() != nil || s.isEnded() {
			return
		}
		if time.Now().After(deadline) {
			// A counted notification was never handled (the client
			// refused it, or it belonged to a stream of an earlier
			// session): catch up, so that later calls do not wait too.
			c.logger.Debug("relayed notifications not handled in time; resynchronising", "read", want, "handled", s.handled.Load())
			if h := s.handled.Load(); h < want {
				s.handled.CompareAndSwap(h, want)
			}
			return
		}
		time.Sleep(wait)
	}
}

func (c *Client) onResourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if c.opts.OnResourceUpdated != nil && req != nil && req.Params != nil {
		c.opts.OnResourceUpdated(req.Params)
	}
}

func serverName(cs *mcp.ClientSession) string {
	if res := cs.InitializeResult(); res != nil && res.ServerInfo != nil {
		return res.ServerInfo.Name
	}
	return ""
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
