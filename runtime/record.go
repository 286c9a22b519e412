package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// recorder writes what every request leaves behind: exactly one receipt,
// one metric sample and, when it failed, one log line. The receiving
// middleware (receive) covers every request the go-sdk dispatches; the
// refusal catchers (refusals.go) cover the requests it refuses before
// dispatch; the relay and the admin API hand it their own events. All of
// them end in write, the one place a receipt is completed and emitted.
type recorder struct {
	log   *slog.Logger
	met   *metrics
	local identity.Principal
	// auth decides the policy id and allow reason of receipts.
	auth *authorizer
	// out writes the receipts (nil: none); Start opens it.
	out *receipts.Writer
	// tags correlates the requests the refusal catchers saw with those
	// the middleware received.
	tags requestTags
}

// receive is the receiving middleware of the MCP server, outermost: for
// every request it establishes the caller, runs the handler, and writes
// the receipt, the metric and the log line. Handlers return a result or an
// *Error: for tools/call the *Error becomes an error result (spec 003
// §3.4), for the other methods a JSON-RPC error. Notifications carry no
// decision and leave no receipt.
func (rec *recorder) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		start := time.Now()
		extra := req.GetExtra()
		rec.tags.claim(extra)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		c := newCaller(rec.local, extra, ss)
		c.setVersion(req)
		c.progress = progressOf(req)
		c.begin(method, argsOf(method, req), start)
		res, err := next(withCaller(ctx, c), method, req)
		if c.answer != nil && err == nil {
			// The upstream answered with a task (tasks.go).
			res = c.answer
		}
		res, err = rec.finish(c, method, res, err, start)
		rec.countDenial(ctx, c)
		return res, err
	}
}

// countDenial counts a denied request of a known principal toward its
// auto-quarantine (policy.Incident.Denied), except denials the incident
// state made itself and those of an unreadable state (not the caller's
// doing). A quarantine it triggers gets a receipt of its own and a log
// line.
func (rec *recorder) countDenial(ctx context.Context, c *caller) {
	in := rec.auth.incident
	d := c.rc.Decision
	if in == nil || d.Result != "deny" || d.PolicyID == "incident" || c.p.IsZero() || slices.Contains(d.ReasonCodes, CodeStateUnavailable) {
		return
	}
	key := c.p.Key()
	quarantined, err := in.Denied(ctx, key)
	if err != nil {
		rec.log.Warn("counting a denial toward auto-quarantine failed", "principal", key, "err", err)
		return
	}
	if !quarantined {
		return
	}
	rec.log.Warn("principal auto-quarantined for its denial rate; release it with quiver admin release", "principal", key)
	q := &caller{p: c.p, jwt: c.jwt, local: c.local}
	q.begin("quarantine", nil, time.Now())
	q.rc.Decision, q.decided = receipts.Decision{Result: "deny", PolicyID: "incident",
		ReasonCodes: []string{policy.ReasonPrincipalQuarantined, ReasonAutoQuarantine}}, true
	q.rc.Outcome.Message = "auto-quarantine: denial rate over the threshold"
	rec.write(q, nil, &Error{Code: CodePolicyDenied, Message: q.rc.Outcome.Message}, 0)
}

// progressOf returns a request's progress token (nil when none).
func progressOf(req mcp.Request) any {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil {
			return r.Params.GetProgressToken()
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil {
			return r.Params.GetProgressToken()
		}
	case *mcp.ReadResourceRequest:
		if r.Params != nil {
			return r.Params.GetProgressToken()
		}
	}
	return nil
}

// unhashed are the methods whose parameters say nothing worth hashing
// into a receipt (pagination cursors, nothing).
var unhashed = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true, "resources/templates/list": true, "ping": true,
}

// argsOf returns what a receipt hashes of a request: a tool call's
// arguments, or the parameters of the other methods.
func argsOf(method string, req mcp.Request) json.RawMessage {
	if unhashed[method] {
		return nil
	}
	if r, ok := req.(*mcp.CallToolRequest); ok {
		if r.Params == nil {
			return nil
		}
		return r.Params.Arguments
	}
	p := req.GetParams()
	if p == nil {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	return b
}

// finish completes one request: it turns a gateway error into what the
// wire carries, and writes the receipt, the metric and the log line.
func (rec *recorder) finish(c *caller, method string, res mcp.Result, err error, start time.Time) (mcp.Result, error) {
	var e *Error
	if err != nil && !errors.As(err, &e) {
		// The go-sdk refused the request (an unknown tool, bad
		// parameters) or it failed in the SDK: the error goes out as it is.
		e = protocolError(err)
	} else if e != nil {
		switch {
		case method == "tools/call" && (e.Code == CodeRequestStateInvalid || c.sessionless && e.Code == CodeClientCapabilityMissing):
			// A retry whose request state does not open is refused as
			// a request, not answered as a tool (SEP-2322: -32602); so
			// is a call that needs a capability the request did not
			// declare (SEP-2575: -32021).
			err = rpcError(e)
		case method == "tools/call":
			res, err = errorResult(e), nil
			if c.sessionless {
				res = completed(res.(*mcp.CallToolResult))
			}
		default:
			err = rpcError(e)
		}
	}
	rec.write(c, res, e, time.Since(start))
	return res, err
}

// write completes c's receipt with the outcome and emits it, then counts
// the metric and logs a failure.
func (rec *recorder) write(c *caller, res mcp.Result, e *Error, took time.Duration) {
	rc := &c.rc
	switch {
	case e == nil:
		if !c.decided {
			rc.Decision = rec.auth.allowDecision()
		}
	case c.decided && rc.Decision.Result == "allow" && (c.keepAllow || !e.refusal()):
		// Allowed, then failed upstream or inside quiver.
	case c.decided && rc.Decision.Result != "allow":
		// The policy's own refusal, recorded as it decided.
	default:
		// A refusal by the gateway: before or after the policy allowed it.
		codes := append([]string{e.Code}, c.reasons...)
		if c.decided {
			codes = append(codes, rc.Decision.ReasonCodes...)
		}
		rc.Decision.Result, rc.Decision.ReasonCodes = "deny", codes
		if rc.Decision.PolicyID == "" {
			rc.Decision.PolicyID = rec.auth.policyID()
			if e.protocol {
				rc.Decision.PolicyID = "protocol"
			}
		}
	}
	rc.Outcome.DurationMS = float64(took.Microseconds()) / 1000
	if rc.Tool != nil {
		switch {
		case e != nil:
			rc.Tool.DenialStage = stageOf(e.Code)
		case isToolError(res):
			rc.Tool.DenialStage = receipts.StageExecution
		}
	}
	code := "ok"
	switch {
	case e != nil:
		code = e.Code
		rc.Outcome.Status, rc.Outcome.ErrorCode = receipts.StatusError, e.Code
		if e.timedOut() {
			rc.Outcome.Status = receipts.StatusTimeout
		}
		if e.protocol {
			rc.Outcome.Message = e.Message
		}
	case isToolError(res):
		code = "tool_error"
		rc.Outcome.Status, rc.Outcome.ErrorCode = receipts.StatusError, CodeToolError
	default:
		rc.Outcome.Status = receipts.StatusSuccess
	}
	if rec.out != nil {
		if res != nil {
			// The size of what the client is sent; no receipts, no cost.
			if b, err := json.Marshal(res); err == nil {
				rc.Outcome.SizeBytesOut = int64(len(b))
			}
		}
		rec.emit(*rc)
	}
	if c.what != "" {
		rec.met.call(c.what, code, took)
	}
	if rc.MCP.ServerID != "" && rc.MCP.ToolName != "" {
		rec.met.toolCall(rc.MCP.ServerID, rc.MCP.ToolName, code, took)
		if rc.Decision.Result == "allow" {
			rec.met.recent.Record(rc.MCP.ServerID, time.Now(), took, code != "ok")
		}
	}
	if e != nil {
		rec.logError(c.what, e)
	}
}

// isToolError reports whether res is a tool result with isError set.
func isToolError(res mcp.Result) bool {
	tr, ok := res.(*mcp.CallToolResult)
	return ok && tr != nil && tr.IsError
}

// emit writes a receipt, with the incident flag of the moment.
func (rec *recorder) emit(rc receipts.Receipt) {
	if rec.out == nil {
		return
	}
	rc.IncidentMode = rc.IncidentMode || rec.auth.incidentActive()
	rec.out.Emit(rc)
}

// logError logs a gateway error of one request: a warning when something
// failed behind it, debug when the caller's input was refused.
func (rec *recorder) logError(what string, e *Error) {
	switch {
	case e.quiet:
		rec.log.Debug("request refused", "what", what, "code", e.Code, "path", e.Path)
	case e.cause != nil && !e.protocol:
		rec.log.Warn("request failed", "what", what, "code", e.Code, "err", e.cause)
	default:
		rec.log.Debug("request refused", "what", what, "code", e.Code, "message", e.Message)
	}
}

// protocolError is the receipt's view of an error the go-sdk returned for
// a request (the request still goes out with that error as it is).
func protocolError(err error) *Error {
	var je *jsonrpc.Error
	code := CodeProtocolError
	if errors.As(err, &je) {
		code = protocolCode(je.Code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code = CodeCancelled
	}
	return &Error{Code: code, Message: sanitize(err.Error()), cause: err, protocol: true}
}

// toolCall runs the handler of one tool: it names the call for its receipt
// and metric; the receiving middleware does the rest.
func toolCall(ctx context.Context, what string, fn func(context.Context) (*mcp.CallToolResult, *Error)) (*mcp.CallToolResult, error) {
	callerOf(ctx).name(what)
	res, e := fn(ctx)
	if e != nil {
		return nil, e
	}
	return res, nil
}

// run returns a handler's gateway error as an error value (a nil *Error is
// no error), for the receiving middleware to write.
func run(fn func() *Error) error {
	if e := fn(); e != nil {
		return e
	}
	return nil
}

// Reason codes quiver adds to the policy's.
const (
	// ReasonNoPolicyConfigured: no policy file is configured, so every
	// call is allowed (today's behaviour, warned about at startup).
	ReasonNoPolicyConfigured = "NO_POLICY_CONFIGURED"
	// ReasonApprovalGranted: a require_approval call proceeds on an
	// operator's grant.
	ReasonApprovalGranted = "APPROVAL_GRANTED"
	// ReasonClientToken: the arguments carried a client credential.
	ReasonClientToken = "CLIENT_TOKEN_IN_ARGS"
	// ReasonConcealed: the caller named an item it may not see, and was
	// answered as if it did not exist; the reason codes that follow say
	// why it may not see it.
	ReasonConcealed = "CONCEALED"
	// ReasonAutoQuarantine: a principal passed the denial-rate threshold
	// and was quarantined.
	ReasonAutoQuarantine = "AUTO_QUARANTINE"
)

// protocolCode names a JSON-RPC error code for a receipt.
func protocolCode(code int64) string {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return CodeMethodNotFound
	case jsonrpc.CodeInvalidParams:
		return CodeInvalidParams
	case jsonrpc.CodeInvalidRequest:
		return CodeInvalidRequest
	case jsonrpc.CodeParseError:
		return CodeParseError
	case mcp.CodeUnsupportedProtocolVersion:
		return CodeProtocolVersionUnsupported
	case mcp.CodeHeaderMismatch:
		return CodeHeaderMismatch
	case jsonrpc.CodeInternalError:
		return CodeInternal
	}
	return CodeProtocolError
}

// rpcError is a gateway error of a method other than tools/call as a
// JSON-RPC error whose message starts with its code.
func rpcError(e *Error) error {
	if e.Code == CodeCapabilityInvalid && e.rpcData == nil {
		// Spec 004's data.reason, and quiver's details beside it.
		e.rpcData = capabilityData(e)
	}
	return &jsonrpc.Error{Code: codes.JSONRPC(e.Code), Message: e.Code + ": " + e.Message, Data: e.rpcData}
}

// denyReceipt records an HTTP request the identity middleware or the
// admin API refused before MCP routing.
func (r *Runtime) denyReceipt(req *http.Request, reason string) {
	r.rec.tags.claimHeader(req.Header)
	c := &caller{}
	c.begin("http", nil, time.Now())
	if req.ContentLength > 0 {
		c.rc.Request.SizeBytesIn = req.ContentLength
	}
	code, msg := CodeUnauthenticated, "unauthenticated"
	if reason == identity.ReasonStateUnavailable {
		// Not the caller's fault: the revocations could not be read.
		code, msg = CodeStateUnavailable, "the state backend is unavailable"
	}
	c.rc.Decision, c.decided = receipts.Decision{Result: "deny", PolicyID: "authn", ReasonCodes: []string{code, reason}}, true
	c.rc.Outcome.Message = req.Method + " " + req.URL.Path
	r.rec.write(c, nil, &Error{Code: code, Message: msg}, 0)
}

// adminReceipt records an operator action of the admin API.
func (r *Runtime) adminReceipt(req *http.Request, a admin.Action) {
	c := &caller{p: a.Principal}
	c.begin(a.Method, nil, time.Now())
	if a.Principal.IsZero() {
		c.rc.Principal = receipts.Principal{Sub: a.Operator, ActorType: identity.ActorSystem}
	}
	c.rc.MCP.ToolID = a.Target
	c.rc.Decision, c.decided = receipts.Decision{Result: "allow", PolicyID: "admin", ReasonCodes: []string{"ADMIN_AUTHENTICATED"}}, true
	c.rc.Outcome.Message = fmt.Sprintf("%s %s -> %d", req.Method, req.URL.Path, a.Status)
	if a.Comment != "" {
		c.rc.Outcome.Message += "; comment: " + a.Comment
	}
	var e *Error
	if a.Status >= 400 {
		// An operator's failed action is still the operator's: allowed.
		e, c.keepAllow = &Error{Code: a.Err, Message: c.rc.Outcome.Message}, true
	}
	r.rec.write(c, nil, e, 0)
}
