//lint:file-ignore SA1019 sampling, elicitation and roots are what an upstream's input requests carry.

package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	qstate "github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// A client at protocol 2026-07-28 has no session on which an upstream
// could ask it for input in the middle of a call. An upstream at the same
// revision answers with an input_required result instead; quiver hands its
// input requests to the client, under a request state of its own that
// binds the round trip to the caller and to the request, and passes the
// client's answers to the upstream's retry (multi-round-trip requests,
// SEP-2322). Every input request is decided and receipted as a relayed
// server-to-client request is (relay.go): policy actions sample and
// elicit, the client's announced capabilities, the incident switch.

// inputRelay relays the input requests of upstream calls made for
// sessionless callers. liveConn calls it around each call (see relayed).
type inputRelay interface {
	// resume returns what a sessionless caller's retry brings for the
	// upstream (its answers and the upstream's request state) and the
	// round it is; a first try is round 1 with nothing. A state that does
	// not open for this caller and request is refused (*Error).
	resume(ctx context.Context, server, target string, args any) (mcp.InputResponseMap, string, int, error)
	// ask decides and receipts each of the upstream's input requests for
	// the caller, and returns the sealed state to hand the client with
	// them; a refused request ends the call (*Error).
	ask(ctx context.Context, server, toolID, target string, args any, round int, reqs mcp.InputRequestMap, upState string) (string, error)
	// held runs call detached for the caller, or resumes the held call
	// its retry's state names; when the upstream asks for input in the
	// middle of the call, it returns that request (decided and
	// receipted) and the sealed state naming the held call instead of
	// the call's result (see holdCall).
	held(ctx context.Context, server, toolID, target string, args any, call func(context.Context) (any, error)) (any, mcp.InputRequestMap, string, error)
}

// mrtr is the runtime's inputRelay.
type mrtr struct {
	r    *Runtime
	seal *protocol.Sealer
	// holds are the upstream calls of this process that wait for a
	// sessionless client's answer (made at Start).
	holds *protocol.Holds
}

// sealingKeyName is the KV key of the sealing key.
const sealingKeyName = "mrtr/key"

// sealingKey returns the key that seals request states, kept in the state
// backend so that every process and replica seals and opens with the same
// key: the first to start creates it, the others read it.
func sealingKey(ctx context.Context, kv qstate.KV) ([]byte, error) {
	fresh, err := protocol.NewKey()
	if err != nil {
		return nil, err
	}
	if _, err := kv.Create(ctx, sealingKeyName, fresh, 0); err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	k, err := kv.Get(ctx, sealingKeyName)
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	if len(k) != protocol.KeySize {
		return nil, fmt.Errorf("sealing key: %d bytes in the state backend, want %d", len(k), protocol.KeySize)
	}
	return k, nil
}

// argsHash is the hash a state binds the request's arguments with; JSON of
// Go maps has sorted keys, so equal arguments hash alike.
func argsHash(args any) string {
	if args == nil {
		return ""
	}
	b, err := json.Marshal(args)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (m *mrtr) resume(ctx context.Context, server, target string, args any) (mcp.InputResponseMap, string, int, error) {
	c := callerOf(ctx)
	if m.seal == nil {
		return nil, "", 0, newError(CodeInternal, "the runtime is not started")
	}
	if c == nil {
		return nil, "", 1, nil
	}
	if c.reqState == "" {
		// Answers without a state of quiver's: the client answers
		// what the upstream asks without a state of its own (or asks
		// again for), and the upstream judges them as it would a
		// direct client's. They carry nothing quiver vouches for.
		return c.inputs, "", 1, nil
	}
	// A state opens once; a call retried after a failure (retry.
	// max_attempts) resumes with what the first attempt opened.
	if o := c.resumed; o != nil {
		return o.answers, o.upState, o.round, o.err
	}
	answers, upState, round, err := m.open(ctx, c, server, target, args)
	c.resumed = &resumption{answers: answers, upState: upState, round: round, err: err}
	return answers, upState, round, err
}

// resumption is what a retry's state opened to.
type resumption struct {
	answers mcp.InputResponseMap
	upState string
	round   int
	err     error
}

func (m *mrtr) open(ctx context.Context, c *caller, server, target string, args any) (mcp.InputResponseMap, string, int, error) {
	st, err := m.openState(ctx, c, server, target, args)
	if err != nil {
		return nil, "", 0, err
	}
	if st.Held != "" {
		return nil, "", 0, newError(CodeRequestStateInvalid, "the request state names a held call, and this upstream no longer holds calls; call again without it").withPath("requestState")
	}
	// Only the answers the upstream asked for travel on.
	answers := make(mcp.InputResponseMap, len(st.InputIDs))
	for _, id := range st.InputIDs {
		if a, ok := c.inputs[id]; ok {
			answers[id] = a
		}
	}
	return answers, st.UpstreamState, st.Round + 1, nil
}

// openState opens the retry's state for caller c and the request
// (server, target, args): the state must open (seal, expiry, principal,
// nonce) and belong to this request.
func (m *mrtr) openState(ctx context.Context, c *caller, server, target string, args any) (protocol.State, error) {
	st, err := m.seal.Open(ctx, c.reqState, c.stateKey())
	if err != nil {
		msg := "the request state is not one quiver issued, or was altered"
		switch {
		case isStateUnavailable(err):
			return protocol.State{}, stateUnavailable(err)
		case errors.Is(err, protocol.ErrStateExpired):
			msg = "the request state has expired; call again without it"
		case errors.Is(err, protocol.ErrStateForeign):
			msg = "the request state was issued to another caller"
		case errors.Is(err, protocol.ErrStateReplayed):
			msg = "the request state was used already"
		}
		return protocol.State{}, newError(CodeRequestStateInvalid, "%s", msg).withPath("requestState")
	}
	if st.Upstream != server || st.Target != target || st.ArgsHash != argsHash(args) {
		return protocol.State{}, newError(CodeRequestStateInvalid, "the request state belongs to another request (tool, prompt, resource or arguments differ)").withPath("requestState")
	}
	return st, nil
}

func (m *mrtr) ask(ctx context.Context, server, toolID, target string, args any, round int, reqs mcp.InputRequestMap, upState string) (string, error) {
	c := callerOf(ctx)
	if round > upstream.MaxInputRounds {
		return "", newError(CodeUpstreamError, "the upstream asked for input more than %d times", upstream.MaxInputRounds)
	}
	ids := make([]string, 0, len(reqs))
	for id := range reqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := m.r.decideInput(c, server, toolID, reqs[id]); err != nil {
			return "", err
		}
	}
	return m.seal.Seal(protocol.State{Upstream: server, Target: target, ArgsHash: argsHash(args), Principal: c.stateKey(),
		UpstreamState: upState, InputIDs: ids, Round: round})
}

// inputKind names what an input request asks of the client: its method
// (for the receipt), the policy action that decides it, and whether the
// client announced the capability it needs. A roots/list request hands the
// upstream what the client knows, as an elicitation does, so the elicit
// action decides it.
func inputKind(ir mcp.InputRequest, caps *mcp.ClientCapabilities) (method, action string, capable bool) {
	switch ir.(type) {
	case *mcp.ElicitParams:
		return "elicitation/create", policy.ActionElicit, caps != nil && caps.Elicitation != nil
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		return "sampling/createMessage", policy.ActionSample, caps != nil && caps.Sampling != nil
	case *mcp.ListRootsParams:
		return "roots/list", policy.ActionElicit, caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged)
	}
	return "", "", false
}

// capabilityOf names the client capability an input request needs.
func capabilityOf(action, method string) string {
	switch {
	case method == "roots/list":
		return "roots"
	case action == policy.ActionSample:
		return "sampling"
	}
	return "elicitation"
}

// decideInput decides one input request of upstream server, made during
// the call of toolID ("" for a prompt or resource) for caller c, and
// writes its receipt, as forward does for a request in the middle of a
// call. It returns the refusal that ends the call, or nil.
func (r *Runtime) decideInput(c *caller, server, toolID string, ir mcp.InputRequest) error {
	method, action, capable := inputKind(ir, c.clientCaps())
	start := time.Now()
	rc := &caller{}
	if method == "" {
		method = "input/unknown"
	}
	rc.begin(method, nil, start)
	rc.rc.MCP.ServerID = server
	rc.rc.Decision, rc.decided = r.auth.allowDecision(), true
	st := r.state.Load()
	rc.rc.MCP.ToolID = toolID
	rc.rc.MCP.TrustLevel = r.upstreamOf(st, server).trust
	if it, ok := st.snap.Lookup(toolID); ok {
		rc.rc.MCP.ToolName = it.UpstreamName
	}
	if c != nil && !c.p.IsZero() {
		rc.rc.Principal = receipts.PrincipalOf(c.p)
	}
	done := func(e *Error) error {
		r.rec.write(rc, nil, e, time.Since(start))
		if e == nil {
			return nil
		}
		return e
	}
	if action == "" {
		return done(newError(CodeUpstreamError, "the upstream asked for input of an unknown kind"))
	}
	if !capable {
		e := newError(CodeClientCapabilityMissing, "the upstream asked for %s, and the client did not announce that capability", method)
		// The spec's data of -32021: the capabilities the request lacked.
		e.rpcData = json.RawMessage(`{"requiredCapabilities":{"` + capabilityOf(action, method) + `":{}}}`)
		return done(e)
	}
	if d := r.decideRelay(&flight{c: c, server: server, toolID: toolID}, action); d != nil {
		rc.decided, rc.rc.Decision, rc.reasons = false, receipts.Decision{PolicyID: d.PolicyID}, d.ReasonCodes
		return done(newError(CodeRelayDenied, "the policy does not let upstream %q send %s to this client", server, method))
	}
	return done(nil)
}

// inputShape reads and writes the multi-round-trip parts of one kind of
// result (a tool call's, a prompt's, a resource's).
type inputShape[R any] struct {
	// asks reads a result's input requests and request state; ok is
	// false for a complete result.
	asks func(R) (reqs mcp.InputRequestMap, state string, ok bool)
	// seal puts quiver's sealed state on an input_required result.
	seal func(R, string)
}

// needsInput is inputShape.asks for any result with NeedsInput.
func needsInput[R interface {
	comparable
	NeedsInput() bool
}](inputs func(R) (mcp.InputRequestMap, string)) func(R) (mcp.InputRequestMap, string, bool) {
	return func(r R) (mcp.InputRequestMap, string, bool) {
		var zero R
		if r == zero || !r.NeedsInput() {
			return nil, "", false
		}
		reqs, st := inputs(r)
		return reqs, st, true
	}
}

var (
	toolShape = inputShape[*mcp.CallToolResult]{
		asks: needsInput(func(r *mcp.CallToolResult) (mcp.InputRequestMap, string) { return r.InputRequests, r.RequestState }),
		seal: func(r *mcp.CallToolResult, s string) { r.RequestState = s },
	}
	promptShape = inputShape[*mcp.GetPromptResult]{
		asks: needsInput(func(r *mcp.GetPromptResult) (mcp.InputRequestMap, string) { return r.InputRequests, r.RequestState }),
		seal: func(r *mcp.GetPromptResult, s string) { r.RequestState = s },
	}
	resourceShape = inputShape[*mcp.ReadResourceResult]{
		asks: needsInput(func(r *mcp.ReadResourceResult) (mcp.InputRequestMap, string) { return r.InputRequests, r.RequestState }),
		seal: func(r *mcp.ReadResourceResult, s string) { r.RequestState = s },
	}
)

// inputResult is an input_required result of type R (a pointer to a
// go-sdk result) with reqs and state. It goes through the result's JSON
// form: the go-sdk keeps a result's type unexported, and only a decoded
// result reports NeedsInput, which the runtime's paths test.
func inputResult[R any](reqs mcp.InputRequestMap, state string) (R, error) {
	var res R
	b, err := json.Marshal(struct {
		ResultType    string              `json:"resultType"`
		InputRequests mcp.InputRequestMap `json:"inputRequests"`
		RequestState  string              `json:"requestState,omitempty"`
	}{"input_required", reqs, state})
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil {
		return res, newError(CodeInternal, "internal gateway error").withCause(err)
	}
	return res, nil
}

// relayed runs one upstream call for the caller in ctx. For a sessionless
// caller it relays input. With an upstream that answers input_required
// (midCall false), the retry's state is opened first (nothing reaches the
// upstream when it does not open), the call carries the answers and the
// upstream's own state, and an input_required answer is decided,
// receipted and returned with quiver's sealed state in place of the
// upstream's. With an upstream that asks in the middle of a call (midCall
// true), the call is held (held, holdCall). Other callers' calls run as
// they are, and an upstream's input_required is answered by
// runtime/upstream's own loop.
func relayed[R any](ctx context.Context, ir inputRelay, midCall func() bool, server, toolID, target string, args any,
	sh inputShape[R], call func(ctx context.Context, answers mcp.InputResponseMap, upState string) (R, error)) (R, error) {
	c := callerOf(ctx)
	if ir == nil || c == nil || !c.sessionless {
		return call(ctx, nil, "")
	}
	var zero R
	if midCall() {
		out, reqs, sealed, err := ir.held(ctx, server, toolID, target, args, func(ctx context.Context) (any, error) {
			return call(upstream.RelayInput(ctx), nil, "")
		})
		if err != nil {
			return zero, err
		}
		if reqs != nil {
			return inputResult[R](reqs, sealed)
		}
		res, _ := out.(R)
		if reqs, upState, ok := sh.asks(res); ok {
			// Not the way of such an upstream, but relayed as any
			// input_required is.
			sealed, err := ir.ask(ctx, server, toolID, target, args, 1, reqs, upState)
			if err != nil {
				return zero, err
			}
			sh.seal(res, sealed)
		}
		return res, nil
	}
	answers, upState, round, err := ir.resume(ctx, server, target, args)
	if err != nil {
		return zero, err
	}
	res, err := call(upstream.RelayInput(ctx), answers, upState)
	if err != nil {
		// The upstream refused the call for a capability the client's
		// _meta did not declare: the client's own refusal (-32021), not
		// an upstream failure.
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == mcp.CodeMissingRequiredClientCapabilities {
			e := newError(CodeClientCapabilityMissing, "upstream %q requires a client capability this request did not declare", server).withCause(err)
			e.rpcData = je.Data
			return res, e
		}
		return res, err
	}
	reqs, upState, ok := sh.asks(res)
	if !ok {
		return res, nil
	}
	sealed, err := ir.ask(ctx, server, toolID, target, args, round, reqs, upState)
	if err != nil {
		return zero, err
	}
	sh.seal(res, sealed)
	return res, nil
}

// held implements inputRelay: the first try of a call starts it held; a
// retry whose state names a held call hands the client's answer to it.
// Then the request waits for what the call does next: its end is the
// result; a request of the upstream in the middle of the call is decided
// and receipted for this caller (a refusal goes back to the upstream, as a
// forwarded request's does, and the wait goes on), the call is put in the
// table of held calls, and the request goes to the client as an
// input_required result under a sealed state that names the call and this
// replica. A full table sheds load: no input requests, and a state whose
// retry starts the call over. The request's end while it waits cancels
// the call; so does the hold timeout while the call waits for the retry.
func (m *mrtr) held(ctx context.Context, server, toolID, target string, args any, call func(context.Context) (any, error)) (any, mcp.InputRequestMap, string, error) {
	c := callerOf(ctx)
	if m.seal == nil || m.holds == nil {
		return nil, nil, "", newError(CodeInternal, "the runtime is not started")
	}
	var (
		h     *protocol.Held
		ev    protocol.Event
		have  bool
		round = 1
	)
	if c.reqState != "" {
		if c.resumed != nil {
			// An attempt of this request (retry.max_attempts) resumed
			// the held call already.
			return nil, nil, "", newError(CodeRequestStateInvalid, "the request state was used by an earlier attempt of this request").withPath("requestState")
		}
		c.resumed = &resumption{}
		st, err := m.openState(ctx, c, server, target, args)
		if err != nil {
			return nil, nil, "", err
		}
		round = st.Round + 1
		if st.Held != "" {
			if h, err = m.take(st); err != nil {
				return nil, nil, "", err
			}
			id, ir, ok := h.Pending()
			if !ok || !slices.Contains(st.InputIDs, id) {
				h.Cancel()
				return nil, nil, "", newError(CodeRequestStateInvalid, "the held call is not waiting for this answer; call again without the state").withPath("requestState")
			}
			if a, ok := c.inputs[id]; ok {
				h.Answer(id, a, nil)
			} else {
				// No answer: the same request is asked again, under a
				// state of its own.
				ev, have = protocol.Event{ID: id, Request: ir}, true
			}
		}
		// A state without a held call (a shed round) starts the call
		// over.
	}
	if h == nil {
		var err error
		if h, err = m.holds.Start(ctx, call); err != nil {
			return nil, nil, "", newError(CodeUpstreamUnavailable, "the call cannot be held: %v", err).withCause(err)
		}
	}
	for {
		if !have {
			var err error
			if ev, err = h.Next(ctx); err != nil {
				return nil, nil, "", err
			}
			if ev.Done {
				return ev.Result, nil, "", ev.Err
			}
		}
		have = false
		if err := m.r.decideInput(c, server, toolID, ev.Request); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				e = newError(CodeRelayDenied, "%s", err.Error())
			}
			h.Answer(ev.ID, nil, &relayError{e.Code, e.Message})
			continue
		}
		return m.hold(c, h, server, target, args, round, ev)
	}
}

// take resumes the held call a state names.
func (m *mrtr) take(st protocol.State) (*protocol.Held, error) {
	if st.Replica != m.holds.Replica() {
		return nil, newError(CodeRequestStateInvalid, "the call this request state belongs to is held by another quiver process or replica; send the retry to the one that answered the first request (or call again without the state)").withPath("requestState")
	}
	h, err := m.holds.Take(st.Held)
	if err != nil {
		return nil, newError(CodeRequestStateInvalid, "the held call has ended: it waited longer than listen.mrtr_hold (%s) for this retry, or was cancelled; call again without the state", m.holds.Timeout()).withPath("requestState")
	}
	return h, nil
}

// hold puts h in the table of held calls and returns its input request
// ev for the client, under a sealed state naming the call.
func (m *mrtr) hold(c *caller, h *protocol.Held, server, target string, args any, round int, ev protocol.Event) (any, mcp.InputRequestMap, string, error) {
	st := protocol.State{Upstream: server, Target: target, ArgsHash: argsHash(args), Principal: c.stateKey(), Round: round}
	if round > upstream.MaxInputRounds {
		h.Cancel()
		return nil, nil, "", newError(CodeUpstreamError, "the upstream asked for input more than %d times", upstream.MaxInputRounds)
	}
	if err := m.holds.Hold(h); err != nil {
		h.Cancel()
		if !errors.Is(err, protocol.ErrHoldFull) {
			return nil, nil, "", newError(CodeUpstreamUnavailable, "the call cannot be held: %v", err).withCause(err)
		}
		// Load shedding (SEP-2322): no input requests; the retry
		// starts the call over.
		m.r.log.Warn("held calls at their limit: a call is shed", "upstream", server)
		sealed, err := m.seal.Seal(st)
		if err != nil {
			return nil, nil, "", newError(CodeInternal, "internal gateway error").withCause(err)
		}
		return nil, mcp.InputRequestMap{}, sealed, nil
	}
	st.InputIDs, st.Held, st.Replica = []string{ev.ID}, h.ID(), m.holds.Replica()
	sealed, err := m.seal.Seal(st)
	if err != nil {
		if h, terr := m.holds.Take(h.ID()); terr == nil {
			h.Cancel()
		}
		return nil, nil, "", newError(CodeInternal, "internal gateway error").withCause(err)
	}
	return nil, mcp.InputRequestMap{ev.ID: ev.Request}, sealed, nil
}
