//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated in protocol 2026-07-28 only; quiver forwards them for the protocols that have them.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/quiver-mcp/quiver/toolid"
)

// relayError is what a refused server-to-client request answers: the
// upstream receives its code (RELAY_DENIED, CLIENT_CAPABILITY_MISSING,
// RELAY_NO_CALLER, RELAY_AMBIGUOUS) as the prefix of a JSON-RPC error's
// message.
type relayError struct {
	code, msg string
}

func (e *relayError) Error() string { return "quiver: " + e.code + ": " + e.msg }

// flight is one downstream request being served by an upstream call: where
// the upstream's notifications and requests about it go back to.
type flight struct {
	id uint64
	// ctx is the downstream request's context: it carries the caller, and
	// over streamable HTTP the stream that the request's answer goes on,
	// so messages sent with it reach the client on that stream.
	ctx context.Context
	c   *caller
	// token is the downstream request's progress token (nil when none);
	// upToken is the one quiver put on the upstream call instead.
	token   any
	upToken string
	// server and toolID name what is being called (for policy and
	// receipts); toolID is "" for requests that are not tool calls, or
	// when the flight stands for a whole session.
	server, toolID string
	// hold is the held call the flight belongs to when it serves a
	// sessionless caller (mrtr.go): a request of the upstream in the
	// middle of the call is parked there for the client's retry.
	hold *protocol.Held

	// The server-to-client requests forwarded for this call: they run
	// under fctx, which ends with the call, and the call waits for them to
	// unwind before it answers (see end). Flights that stand for a session
	// have no end.
	mu     sync.Mutex
	fwd    sync.WaitGroup
	active int
	ended  bool
	// cut is set when a forwarded request ended by cancellation: its
	// notifications/cancelled may still be on its way to the client.
	cut     bool
	fctx    context.Context
	fcancel context.CancelFunc
}

// enter registers a forwarded request; it reports false once the call has
// ended.
func (f *flight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return false
	}
	f.active++
	f.fwd.Add(1)
	return true
}

// leave ends a forwarded request registered with enter; cut tells that it
// ended by cancellation.
func (f *flight) leave(cut bool) {
	f.mu.Lock()
	f.active--
	f.cut = f.cut || cut
	f.mu.Unlock()
	f.fwd.Done()
}

// forwardCtx is the context a forwarded request of f runs under.
func (f *flight) forwardCtx() context.Context {
	if f.fctx != nil {
		return f.fctx
	}
	return f.ctx
}

// unwindTimeout bounds how long a finished call waits for its forwarded
// requests to be cancelled, and unwindGrace is the time it then leaves the
// go-sdk to send their notifications/cancelled (it sends them from a
// goroutine of its own) on the call's stream before the call's answer
// closes it.
const (
	unwindTimeout = time.Second
	unwindGrace   = 10 * time.Millisecond
)

// end cancels the requests still forwarded for the call and waits for
// them, so that the client learns of their cancellation before the call's
// answer.
func (f *flight) end() {
	f.mu.Lock()
	f.ended = true
	active := f.active
	f.mu.Unlock()
	if f.fcancel == nil {
		return
	}
	f.fcancel()
	if active > 0 {
		done := make(chan struct{})
		go func() {
			f.fwd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(unwindTimeout):
			return
		}
	}
	f.mu.Lock()
	cut := f.cut
	f.mu.Unlock()
	if cut {
		time.Sleep(unwindGrace)
	}
}

func (f *flight) session() *mcp.ServerSession {
	if f.c == nil {
		return nil
	}
	return f.c.ss
}

type flightKey struct{}

// relay routes what upstream sessions send back while they serve calls:
// progress and log notifications, and sampling and elicitation requests,
// go to the downstream session whose call caused them.
//
// A shared upstream session cannot say which of its calls a message is
// about (under protocol 2025-11-25 a server-to-client request carries no
// reference to the request it serves), so the relay attributes it to the
// client whose calls are in flight on that session, and refuses when the
// calls of several clients are (RELAY_AMBIGUOUS). A per-client upstream
// session belongs to one downstream session, and a multi-round-trip
// upstream answers on the call's own context: both are exact.
type relay struct {
	// base is the runtime's context: what is sent for a session rather
	// than for one of its calls is sent with it.
	base    context.Context
	mu      sync.Mutex
	seq     uint64
	flights map[*upstream.Client]map[uint64]*flight
	tokens  map[string]*flight
	// owners holds the downstream session of each per-client upstream
	// session, for what it sends while none of its calls is in flight.
	owners map[*upstream.Client]*flight
}

func newRelay() *relay {
	return &relay{base: context.Background(), flights: map[*upstream.Client]map[uint64]*flight{}, tokens: map[string]*flight{}, owners: map[*upstream.Client]*flight{}}
}

// begin registers a call on upstream client uc made for the downstream
// request in ctx. It returns the context to make the call with (a
// multi-round-trip upstream's requests find the flight in it), the progress
// token to put on the upstream call ("" when the client asked for no
// progress), and the function that ends the flight.
func (rl *relay) begin(ctx context.Context, uc *upstream.Client, server, toolID string) (context.Context, string, func()) {
	c := callerOf(ctx)
	rl.mu.Lock()
	rl.seq++
	f := &flight{id: rl.seq, ctx: ctx, c: c, server: server, toolID: toolID, hold: protocol.HeldOf(ctx)}
	f.fctx, f.fcancel = context.WithCancel(ctx)
	if c != nil && c.progress != nil {
		f.token = c.progress
		f.upToken = "quiver-" + strconv.FormatUint(f.id, 10)
		rl.tokens[f.upToken] = f
	}
	fs := rl.flights[uc]
	if fs == nil {
		fs = map[uint64]*flight{}
		rl.flights[uc] = fs
	}
	fs[f.id] = f
	rl.mu.Unlock()
	return context.WithValue(ctx, flightKey{}, f), f.upToken, func() {
		rl.mu.Lock()
		delete(rl.flights[uc], f.id)
		if len(rl.flights[uc]) == 0 {
			delete(rl.flights, uc)
		}
		if f.upToken != "" {
			delete(rl.tokens, f.upToken)
		}
		rl.mu.Unlock()
		f.end()
	}
}

// target finds the downstream request that a message of upstream client uc
// belongs to; hctx is the context the message was delivered with. When one
// client has several calls in flight there, the message belongs to the
// client but to none of its calls in particular: the flight returned then
// stands for the session (base context, no tool, no end), so the message
// neither travels on nor ends with an unrelated call's stream.
func (rl *relay) target(hctx context.Context, uc *upstream.Client) (*flight, *relayError) {
	if f, ok := hctx.Value(flightKey{}).(*flight); ok {
		return f, nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	var pick *flight
	n := 0
	// A held call waiting for its client's retry is blocked on the
	// request it made: a new request is another call's, unless no other
	// is in flight. The calls set aside must be the same principal's
	// (anonymous callers count as one, as for request states).
	var waiting []*flight
	for _, f := range rl.flights[uc] {
		if f.hold != nil && f.hold.Waiting() {
			waiting = append(waiting, f)
			continue
		}
		if pick != nil && pick.session() != f.session() {
			return nil, &relayError{CodeRelayAmbiguous, fmt.Sprintf("calls of several clients are in flight on the shared session of upstream %q; set sessions: per_client for it", uc.Name())}
		}
		pick = f
		n++
	}
	if n == 0 && len(waiting) == 1 {
		return waiting[0], nil
	}
	for _, w := range waiting {
		if pick == nil || w.c.stateKey() != pick.c.stateKey() {
			return nil, &relayError{CodeRelayAmbiguous, fmt.Sprintf("calls of several clients are in flight on the shared session of upstream %q; set sessions: per_client for it", uc.Name())}
		}
	}
	switch {
	case n == 1:
		return pick, nil
	case n > 1:
		if o, ok := rl.owners[uc]; ok {
			return o, nil
		}
		ctx := rl.base
		if pick.c != nil {
			ctx = withCaller(ctx, pick.c)
		}
		return &flight{ctx: ctx, c: pick.c, server: pick.server}, nil
	}
	if o, ok := rl.owners[uc]; ok {
		return o, nil
	}
	return nil, &relayError{CodeRelayNoCaller, fmt.Sprintf("no call is in flight on upstream %q", uc.Name())}
}

// byToken finds the flight of an upstream progress token.
func (rl *relay) byToken(tok any) *flight {
	s, ok := tok.(string)
	if !ok {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.tokens[s]
}

// own records that upstream client uc serves downstream session c alone.
func (rl *relay) own(uc *upstream.Client, f *flight) {
	rl.mu.Lock()
	rl.owners[uc] = f
	rl.mu.Unlock()
}

func (rl *relay) disown(uc *upstream.Client) {
	rl.mu.Lock()
	delete(rl.owners, uc)
	rl.mu.Unlock()
}

// relayTimeout bounds a forwarded notification.
const relayTimeout = 5 * time.Second

// relayHooks returns the upstream.Options hooks of upstream name: uc is set
// to the client once it exists (the hooks are built before it).
func (r *Runtime) relayHooks(name string, uc **upstream.Client, o *upstream.Options) {
	o.OnProgress = func(p *mcp.ProgressNotificationParams) {
		f := r.relay.byToken(p.ProgressToken)
		if f == nil || f.session() == nil {
			return
		}
		fwd := *p
		fwd.ProgressToken = f.token
		ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), relayTimeout)
		defer cancel()
		if err := f.session().NotifyProgress(ctx, &fwd); err != nil {
			r.log.Debug("progress not forwarded", "upstream", name, "err", err)
		}
	}
	//lint:ignore SA1019 logging is deprecated in protocol 2026-07-28 only.
	o.OnLog = func(p *mcp.LoggingMessageParams) {
		f, rerr := r.relay.target(context.Background(), *uc)
		if rerr != nil || f.session() == nil {
			r.log.Debug("upstream log", "upstream", name, "level", p.Level, "logger", p.Logger)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), relayTimeout)
		defer cancel()
		// The downstream session's own logging/setLevel filters.
		if err := f.session().Log(ctx, p); err != nil {
			r.log.Debug("log notification not forwarded", "upstream", name, "err", err)
		}
	}
	o.OnCreateMessage = func(hctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
		resp, err := r.forward(hctx, *uc, "sampling/createMessage", policy.ActionSample, req.Params, func(ctx context.Context, f *flight) (mcp.InputResponse, error) {
			if caps := clientCaps(f.session()); caps == nil || caps.Sampling == nil {
				return nil, &relayError{CodeClientCapabilityMissing, "the client did not announce the sampling capability"}
			}
			//lint:ignore SA1019 sampling is deprecated in protocol 2026-07-28 only.
			return f.session().CreateMessageWithTools(ctx, req.Params)
		})
		if err != nil {
			return nil, err
		}
		switch v := resp.(type) {
		case *mcp.CreateMessageWithToolsResult:
			return v, nil
		case *mcp.CreateMessageResult:
			return &mcp.CreateMessageWithToolsResult{Meta: v.Meta, Content: []mcp.Content{v.Content}, Model: v.Model, Role: v.Role, StopReason: v.StopReason}, nil
		}
		return nil, answerKind("sampling/createMessage", resp)
	}
	o.OnElicit = func(hctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		resp, err := r.forward(hctx, *uc, "elicitation/create", policy.ActionElicit, req.Params, func(ctx context.Context, f *flight) (mcp.InputResponse, error) {
			if caps := clientCaps(f.session()); caps == nil || caps.Elicitation == nil {
				return nil, &relayError{CodeClientCapabilityMissing, "the client did not announce the elicitation capability"}
			}
			// The go-sdk's ServerSession.Elicit checks the answer against
			// its own reading of the schema; the upstream that asked is the
			// one to judge it. So the schema travels beside the call and
			// elicitSchema puts it back on the wire.
			p := *req.Params
			ctx = context.WithValue(ctx, elicitSchemaKey{}, p.RequestedSchema)
			p.RequestedSchema = nil
			return f.session().Elicit(ctx, &p)
		})
		if err != nil {
			return nil, err
		}
		if v, ok := resp.(*mcp.ElicitResult); ok {
			return v, nil
		}
		return nil, answerKind("elicitation/create", resp)
	}
	o.OnListRoots = func(hctx context.Context, req *mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
		params := req.Params
		if params == nil {
			params = &mcp.ListRootsParams{}
		}
		// Roots tell the upstream what the client has: decided as an
		// elicitation is.
		resp, err := r.forward(hctx, *uc, "roots/list", policy.ActionElicit, params, func(ctx context.Context, f *flight) (mcp.InputResponse, error) {
			if caps := clientCaps(f.session()); caps == nil || (caps.RootsV2 == nil && !caps.Roots.ListChanged) {
				return nil, &relayError{CodeClientCapabilityMissing, "the client did not announce the roots capability"}
			}
			return f.session().ListRoots(ctx, params)
		})
		if err != nil {
			return nil, err
		}
		if v, ok := resp.(*mcp.ListRootsResult); ok {
			return v, nil
		}
		return nil, answerKind("roots/list", resp)
	}
	o.OnResourceUpdated = func(p *mcp.ResourceUpdatedNotificationParams) {
		ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
		defer cancel()
		if err := r.server.ResourceUpdated(ctx, p); err != nil {
			r.log.Debug("resource update not forwarded", "upstream", name, "err", err)
		}
	}
}

// answerKind is the error of a client's answer that does not answer the
// request it was given for (a sessionless client's retry can carry any).
func answerKind(method string, resp mcp.InputResponse) error {
	return &relayError{CodeClientError, fmt.Sprintf("the client answered %s with %T", method, resp)}
}

// clientCaps returns the capabilities a downstream session announced.
func clientCaps(ss *mcp.ServerSession) *mcp.ClientCapabilities {
	if ss == nil {
		return nil
	}
	if p := ss.InitializeParams(); p != nil {
		return p.Capabilities
	}
	return nil
}

// forward routes one server-to-client request of upstream client uc to
// the downstream session it belongs to, after the policy allowed it, and
// writes its receipt. send runs with a context that ends when the
// downstream request ends or the upstream cancels its request. The request
// of a held call (a sessionless caller's) is parked there instead, for the
// client's retry to answer (ir is what the client is asked).
func (r *Runtime) forward(hctx context.Context, uc *upstream.Client, method, action string, ir mcp.InputRequest, send func(context.Context, *flight) (mcp.InputResponse, error)) (mcp.InputResponse, error) {
	start := time.Now()
	rc := &caller{}
	rc.begin(method, nil, start)
	rc.rc.MCP.ServerID = uc.Name()
	// Allowed unless the relay refuses it (a failure at the client keeps
	// the allow).
	rc.rc.Decision, rc.decided = r.auth.allowDecision(), true
	done := func(code string, err error) (mcp.InputResponse, error) {
		var e *Error
		if err != nil {
			e = &Error{Code: code, Message: sanitize(err.Error())}
		}
		r.rec.write(rc, nil, e, time.Since(start))
		return nil, err
	}
	f, rerr := r.relay.target(hctx, uc)
	if rerr != nil {
		return done(rerr.code, rerr)
	}
	st := r.state.Load()
	rc.rc.MCP.ToolID = f.toolID
	rc.rc.MCP.TrustLevel = r.upstreamOf(st, f.server).trust
	if it, ok := st.snap.Lookup(f.toolID); ok {
		rc.rc.MCP.ToolName = it.UpstreamName
	}
	if f.c != nil {
		if !f.c.p.IsZero() {
			rc.rc.Principal = receipts.PrincipalOf(f.c.p)
		}
		if f.c.ss != nil {
			rc.rc.MCP.SessionID = f.c.ss.ID()
		}
	}
	if f.hold != nil {
		// Decided and receipted by the request that hands it to the
		// client (mrtr.go), with that request's capabilities.
		return f.hold.Ask(hctx, ir)
	}
	if f.c != nil && f.c.sessionless {
		// A 2026-07-28 client takes no request in the middle of a call;
		// the go-sdk would refuse to send one with an error that names
		// neither the upstream nor the cause.
		return done(CodeRelaySessionless, &relayError{CodeRelaySessionless, fmt.Sprintf("upstream %q sent %s in the middle of a call for a client at protocol %s, which takes no such requests", f.server, method, f.c.version)})
	}
	if f.session() == nil {
		return done(CodeClientCapabilityMissing, &relayError{CodeClientCapabilityMissing, "the call has no client session to ask"})
	}
	if d := r.decideRelay(f, action); d != nil {
		// The refusal lists RELAY_DENIED, then the policy's reasons.
		rc.decided, rc.rc.Decision, rc.reasons = false, receipts.Decision{PolicyID: d.PolicyID}, d.ReasonCodes
		return done(CodeRelayDenied, &relayError{CodeRelayDenied, fmt.Sprintf("the policy does not let upstream %q send %s to this client", f.server, method)})
	}
	if !f.enter() {
		return done(CodeRelayNoCaller, &relayError{CodeRelayNoCaller, "the call it belongs to has ended"})
	}
	ctx, cancel := context.WithCancel(f.forwardCtx())
	defer cancel()
	defer func() { f.leave(ctx.Err() != nil) }()
	stop := context.AfterFunc(hctx, cancel)
	defer stop()
	resp, err := send(ctx, f)
	if err != nil {
		var re *relayError
		if errors.As(err, &re) {
			return done(re.code, err)
		}
		return done(CodeClientError, err)
	}
	_, _ = done("", nil)
	return resp, nil
}

// relayStateTimeout bounds the state reads of one relay decision.
const relayStateTimeout = 5 * time.Second

// decideRelay asks the incident state and the policy whether the upstream
// of f may send a server-to-client request of the given action; it returns
// the denying decision, or nil. Without a policy everything is allowed; a
// configured policy must allow the action explicitly.
func (r *Runtime) decideRelay(f *flight, action string) *policy.Decision {
	if !r.auth.filtering() {
		return nil
	}
	st := r.state.Load()
	it, ok := st.snap.Lookup(f.toolID)
	if !ok {
		// A flight that stands for a session names no tool: the
		// request is decided for its upstream.
		it = &catalog.Item{Kind: toolid.KindTool, Server: f.server}
	}
	// The incident state is read from the state backend: bounded, and a
	// failure denies (fail closed).
	ctx, cancel := context.WithTimeout(context.Background(), relayStateTimeout)
	defer cancel()
	if f.c != nil {
		ctx = withCaller(ctx, f.c)
	}
	if d := r.decide(ctx, st, it, action); !d.Allowed() {
		return &d
	}
	return nil
}

type elicitSchemaKey struct{}

// elicitSchema is the sending middleware that restores the requestedSchema
// of a forwarded elicitation/create (see relayHooks), so the client
// receives the upstream's schema byte for byte.
func elicitSchema(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		schema := ctx.Value(elicitSchemaKey{})
		if schema == nil || method != "elicitation/create" {
			return next(ctx, method, req)
		}
		// ServerSession.Elicit sends a *ServerRequest[Params]; its params
		// are the session's own copy, which Elicit reads again afterwards,
		// so the schema goes on a copy of the request.
		sr, ok := req.(*mcp.ServerRequest[mcp.Params])
		if !ok {
			return next(ctx, method, req)
		}
		ep, ok := sr.Params.(*mcp.ElicitParams)
		if !ok || ep == nil {
			return next(ctx, method, req)
		}
		p := *ep
		p.RequestedSchema = schema
		out := *sr
		out.Params = &p
		return next(ctx, method, &out)
	}
}
