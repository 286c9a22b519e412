package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/capability"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// Privilege separation (spec 004's alternative design, phase 1): a
// restricted principal's tool_execute is only a request; a full principal
// with the fulfil permission lists the requests (tool_requests) and runs
// one on the requester's behalf (tool_fulfil), through every guard as the
// requester; both read the result.

// The privilege-separation meta-tools, listed while the policy marks a
// principal restricted or lets one fulfil.
const (
	ToolRequests = "tool_requests"
	ToolFulfil   = "tool_fulfil"
)

var toolRequestsTool = &mcp.Tool{Name: ToolRequests,
	InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
		`"request_id":{"type":"string","maxLength":64,"description":"One request: its status and, once fulfilled, its result."}}}`),
	Description: "Tool requests of restricted principals: yours (with their results), or, with the fulfil permission, the pending ones to fulfil.",
	Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}}

var toolFulfilTool = &mcp.Tool{Name: ToolFulfil,
	InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["request_id"],"properties":{` +
		`"request_id":{"type":"string","minLength":1,"maxLength":64},` +
		`"refuse":{"type":"boolean","description":"Refuse the request instead of running it."}}}`),
	Description: "Run a restricted principal's pending tool request on its behalf (every guard applies, as for the requester), or refuse it. Needs the fulfil permission."}

// restricted reports whether the caller's calls are only requests.
func (r *Runtime) restricted(ctx context.Context) bool {
	if r.auth.policy == nil {
		return false
	}
	restricted, _ := r.auth.policy.Policy().Privilege(principalOf(ctx))
	return restricted
}

// mayFulfil reports whether the caller may fulfil requests.
func (r *Runtime) mayFulfil(ctx context.Context) bool {
	p := principalOf(ctx)
	if r.auth.policy == nil || p.IsZero() {
		return false
	}
	_, fulfil := r.auth.policy.Policy().Privilege(p)
	return fulfil
}

// queueToolRequest records a restricted principal's checked call.
func (r *Runtime) queueToolRequest(ctx context.Context, it *catalog.Item, a *executeArgs, capJTI string) *Error {
	p := principalOf(ctx)
	if p.IsZero() {
		return newError(CodePolicyDenied, "a restricted principal must authenticate to request calls")
	}
	if r.caps == nil {
		return newError(CodeInternal, "tool requests are not available")
	}
	call := *a
	call.ToolID = it.ID
	raw, err := json.Marshal(&call)
	if err != nil {
		return newError(CodeInternal, "internal gateway error").withCause(err)
	}
	tr, err := r.caps.requests.Create(ctx, capability.ToolRequest{Requester: p, ToolID: it.ID, Call: raw, CapabilityJTI: capJTI}, time.Now())
	if err != nil {
		return stateUnavailable(err)
	}
	recordCapability(ctx, receipts.Capability{Action: "request", RequestID: tr.ID, JTI: capJTI})
	r.log.Info("tool request recorded", "request_id", tr.ID, "tool_id", it.ID, "requester", p.Key())
	return newError(CodeToolRequestPending, "you are a restricted principal: this call is request %s, which a principal with the fulfil permission runs for you; read its result with %s {request_id}", tr.ID, ToolRequests).
		withDetail("request_id", tr.ID)
}

// requestView is a tool request as tool_requests shows it: the call to
// fulfillers, the result to both, the requester by key only.
type requestView struct {
	ID          string          `json:"request_id"`
	Requester   string          `json:"requester"`
	ToolID      string          `json:"tool_id"`
	Status      string          `json:"status"`
	RequestedAt time.Time       `json:"requested_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
	FulfilledBy string          `json:"fulfilled_by,omitempty"`
	Call        json.RawMessage `json:"call,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
}

func viewOf(tr capability.ToolRequest, fulfiller bool) requestView {
	v := requestView{ID: tr.ID, Requester: tr.Requester.Key(), ToolID: tr.ToolID, Status: tr.Status, RequestedAt: tr.RequestedAt,
		ExpiresAt: tr.ExpiresAt, FulfilledBy: tr.FulfilledBy, Result: tr.Result}
	if fulfiller {
		v.Call = tr.Call
	}
	return v
}

func (r *Runtime) handleToolRequests(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolRequests, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a struct {
			RequestID string `json:"request_id"`
		}
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		if r.caps == nil {
			return nil, newError(CodeInternal, "tool requests are not available")
		}
		p, fulfiller := principalOf(ctx), r.mayFulfil(ctx)
		if p.IsZero() {
			return nil, newError(CodePolicyDenied, "tool requests belong to authenticated principals")
		}
		if a.RequestID != "" {
			tr, err := r.caps.requests.Get(ctx, a.RequestID)
			// Another principal's request reads like a missing one.
			if errors.Is(err, capability.ErrRequestNotFound) || err == nil && !fulfiller && tr.Requester.Key() != p.Key() {
				return nil, newError(CodeArgsInvalid, "no tool request %q for this caller", a.RequestID).withPath("request_id")
			}
			if err != nil {
				return nil, stateUnavailable(err)
			}
			return structured(viewOf(tr, fulfiller), ""), nil
		}
		all, err := r.caps.requests.List(ctx)
		if err != nil {
			return nil, stateUnavailable(err)
		}
		out := []requestView{}
		now := time.Now()
		for _, tr := range all {
			switch {
			case fulfiller && tr.Status == capability.RequestPending && now.Before(tr.ExpiresAt):
				out = append(out, viewOf(tr, true))
			case !fulfiller && tr.Requester.Key() == p.Key():
				out = append(out, viewOf(tr, false))
			}
		}
		return structured(map[string]any{"tool_requests": out}, ""), nil
	})
}

func (r *Runtime) handleToolFulfil(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolFulfil, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a struct {
			RequestID string `json:"request_id"`
			Refuse    bool   `json:"refuse"`
		}
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		if r.caps == nil {
			return nil, newError(CodeInternal, "tool requests are not available")
		}
		if !r.mayFulfil(ctx) {
			return nil, newError(CodePolicyDenied, "fulfilling tool requests needs a full principal with the fulfil permission")
		}
		c := callerOf(ctx)
		if c == nil {
			// Without a caller the call could not run as the requester.
			return nil, newError(CodeInternal, "internal gateway error")
		}
		by := principalOf(ctx).Key()
		now := time.Now()
		var tr capability.ToolRequest
		var err error
		if a.Refuse {
			tr, err = r.caps.requests.Refuse(ctx, a.RequestID, by, now)
		} else {
			tr, err = r.caps.requests.Claim(ctx, a.RequestID, by, now)
		}
		switch {
		case errors.Is(err, capability.ErrRequestNotFound):
			return nil, newError(CodeArgsInvalid, "no tool request %q", a.RequestID).withPath("request_id")
		case errors.Is(err, capability.ErrRequestDecided):
			return nil, newError(CodeArgsInvalid, "tool request %q is %s, not pending", a.RequestID, tr.Status).withPath("request_id")
		case err != nil:
			return nil, stateUnavailable(err)
		}
		rc := receipts.Capability{Action: "fulfil", RequestID: tr.ID, OnBehalfOf: tr.Requester.Key(), FulfilledBy: by, JTI: tr.CapabilityJTI}
		if a.Refuse {
			rc.Action = "refuse"
			recordCapability(ctx, rc)
			return structured(viewOf(tr, true), ""), nil
		}
		var call executeArgs
		if err := json.Unmarshal(tr.Call, &call); err != nil {
			return nil, newError(CodeInternal, "the tool request is unreadable").withCause(err)
		}
		call.fulfilling = true
		restore := c.runAs(tr.Requester)
		out, e := r.execute(ctx, req.Session, &call, false)
		restore()
		result := out
		if e != nil {
			result = errorResult(e)
		}
		raw, err := json.Marshal(result)
		if err != nil {
			raw = nil
		}
		if err := r.caps.requests.Finish(ctx, tr, e != nil, raw, time.Now()); err != nil {
			r.log.Error("tool request result not stored", "request_id", tr.ID, "err", err)
		}
		recordCapability(ctx, rc)
		r.log.Info("tool request fulfilled", "request_id", tr.ID, "on_behalf_of", rc.OnBehalfOf, "fulfilled_by", by, "failed", e != nil)
		return out, e
	})
}

// runAs makes the caller stand for p (a restricted principal whose
// request a full one fulfils) until the returned function restores it:
// policy, guards, rate limits, idempotency records and artifacts are the
// requester's. The receipt keeps the fulfiller as its principal.
func (c *caller) runAs(p identity.Principal) func() {
	saved, savedJWT, savedLocal, savedSubject := c.p, c.jwt, c.local, c.subject
	c.p, c.subject = p, nil
	c.local = p.Issuer == identity.LocalIssuer || p.Issuer == ""
	c.jwt = !c.local
	return func() { c.p, c.jwt, c.local, c.subject = saved, savedJWT, savedLocal, savedSubject }
}
