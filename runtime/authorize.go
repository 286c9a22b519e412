package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/argguard"
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/egress"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/toolid"
)

// authorizer decides what a caller may see and call: the incident state
// (kill rules, revocations, quarantine), then the policy, then the
// operators' approvals. Changing how quiver authorizes means reading this
// type and the Runtime methods in this file that build its requests.
type authorizer struct {
	// policy is the policy engine (nil: every call is allowed).
	policy *policy.Engine
	// incident and approvals are opened by Start.
	incident  *policy.Incident
	approvals *policy.Approvals
}

// policyID names the policy in force for a receipt ("none" without one).
func (a *authorizer) policyID() string {
	if a.policy == nil {
		return "none"
	}
	if p := a.policy.Policy(); p != nil {
		return p.ID
	}
	return "none"
}

// allowReason is the reason code of a request no rule judged.
func (a *authorizer) allowReason() string {
	if a.policy == nil {
		return ReasonNoPolicyConfigured
	}
	return policy.ReasonAllowed
}

// allowDecision is the receipt decision of a request no rule judged.
func (a *authorizer) allowDecision() receipts.Decision {
	return receipts.Decision{Result: "allow", PolicyID: a.policyID(), ReasonCodes: []string{a.allowReason()}}
}

// incidentActive reports whether incident mode was on at the last check
// (receipts: the request's own check read it just before).
func (a *authorizer) incidentActive() bool { return a.incident != nil && a.incident.WasActive() }

// pin reads the incident state once for the checks of one request made
// with the returned context (see policy.Incident.Pin).
func (a *authorizer) pin(ctx context.Context) context.Context {
	if a.incident == nil {
		return ctx
	}
	return a.incident.Pin(ctx)
}

// filtering reports whether visibility depends on the caller at all.
func (a *authorizer) filtering() bool { return a.policy != nil || a.incident != nil }

// evaluate asks the incident state, then the policy, about one request.
// An incident state that cannot be read denies (fail closed), with reason
// code STATE_UNAVAILABLE.
func (a *authorizer) evaluate(ctx context.Context, req policy.Request) policy.Decision {
	if a.incident != nil {
		if d, _ := a.incident.Evaluate(ctx, req); d.Denied {
			codes := []string{policy.ReasonDenied, d.Code}
			if d.RuleID != "" {
				codes = append(codes, "kill_rule:"+d.RuleID)
			}
			return policy.Decision{Effect: policy.EffectDeny, PolicyID: "incident", ReasonCodes: codes}
		}
	}
	if a.policy == nil {
		return policy.Decision{Effect: policy.EffectAllow, PolicyID: "none", ReasonCodes: []string{ReasonNoPolicyConfigured}}
	}
	return a.policy.Decide(req)
}

// toolRequest is the policy request about one catalog item.
func (r *Runtime) toolRequest(ctx context.Context, st *state, it *catalog.Item, action string) policy.Request {
	up := r.upstreamOf(st, it.Server)
	req := policy.Request{Principal: principalOf(ctx), Server: it.Server, Namespace: it.Namespace, ToolID: it.ID,
		ToolClass: string(guard.ClassUnclassified), Risk: up.risk, TrustLevel: up.trust, Kind: string(it.Kind), Action: action}
	if req.Kind == "" {
		req.Kind = string(toolid.KindTool)
	}
	if reg := st.gate.Registry(); reg != nil && it.Kind == toolid.KindTool {
		if p, ok := reg.Lookup(it.Server, it.UpstreamName); ok {
			req.ToolClass = string(p.Class)
		}
	}
	if c := callerOf(ctx); c != nil && c.ss != nil {
		req.SessionID = c.ss.ID()
	}
	if e := st.owner[it.Server]; e != nil {
		req.Egress = e.network
	}
	return req
}

// namesHost reports whether raw JSON arguments name a network destination
// anywhere (egress.Find, scheme-less forms included): a call incident
// mode's egress block refuses.
func namesHost(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		if depth > argguard.MaxDepth+1 {
			return true // deeper than preflight admits: treat as naming one
		}
		switch x := v.(type) {
		case string:
			return len(egress.Find(x, true)) > 0
		case []any:
			for _, c := range x {
				if walk(c, depth+1) {
					return true
				}
			}
		case map[string]any:
			for k, c := range x {
				if len(egress.Find(k, false)) > 0 || walk(c, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(v, 0)
}

// decide asks the incident state, then the policy, about one item.
func (r *Runtime) decide(ctx context.Context, st *state, it *catalog.Item, action string) policy.Decision {
	return r.auth.evaluate(ctx, r.toolRequest(ctx, st, it, action))
}

// filtering reports whether what a caller may see depends on anything:
// a policy or incident state, or prod, which hides unclassified tools.
func (r *Runtime) filtering() bool {
	return r.auth.filtering() || r.cfg.Environment == guard.EnvProd
}

// visible reports whether the caller may see an item: not a tool that
// no registry classifies in prod (every call to it is refused, so listing
// it only shows what exists), and not an item the policy or incident state
// hides from this caller.
func (r *Runtime) visible(ctx context.Context, st *state, it *catalog.Item) bool {
	if !r.filtering() {
		return true
	}
	if it.Kind == toolid.KindTool && st.gate.Hides(it.Server, it.UpstreamName) {
		return false
	}
	if !r.auth.filtering() {
		return true
	}
	return r.decide(ctx, st, it, policy.ActionList).Visible()
}

// concealed reports whether the caller is to be answered as if it did not
// exist: a tool prod hides (unclassified), or an item the policy does not
// let this caller see. The receipt records the item and the true reason;
// the caller gets the answer of an item that does not exist (spec 001 MUST
// 3: what a caller may not see it cannot probe for either). An item hidden
// only by the incident state (a kill rule, quarantine, a state that cannot
// be read) is not concealed: the policy lets the caller know it, and its
// call is refused with the incident's reasons.
func (r *Runtime) concealed(ctx context.Context, st *state, it *catalog.Item) bool {
	return !r.visible(ctx, st, it) && r.conceal(ctx, st, it)
}

// hidden reports whether the caller may not see it, for the doors of
// discovery (hydrate, resource and prompt reads): the incident state hides
// from them too. A concealment is recorded as by concealed.
func (r *Runtime) hidden(ctx context.Context, st *state, it *catalog.Item) bool {
	if r.visible(ctx, st, it) {
		return false
	}
	r.conceal(ctx, st, it)
	return true
}

// conceal records, for an item the caller may not see, whether that is
// the policy's or prod's doing (see concealed) and reports it.
func (r *Runtime) conceal(ctx context.Context, st *state, it *catalog.Item) bool {
	var d policy.Decision
	switch {
	case it.Kind == toolid.KindTool && st.gate.Hides(it.Server, it.UpstreamName):
		d = policy.Decision{Effect: policy.EffectDeny, PolicyID: r.auth.policyID(), ReasonCodes: []string{ReasonConcealed, codes.ToolUnclassifiedDenied}}
	case r.auth.policy != nil:
		d = r.auth.policy.Decide(r.toolRequest(ctx, st, it, policy.ActionList))
		if d.Visible() {
			return false
		}
		d.ReasonCodes = append([]string{ReasonConcealed}, d.ReasonCodes...)
	default:
		return false
	}
	r.recordItem(ctx, st, it)
	r.recordDecision(ctx, d)
	return true
}

// recordItem puts the item into the caller's receipt.
func (r *Runtime) recordItem(ctx context.Context, st *state, it *catalog.Item) {
	c := callerOf(ctx)
	if c == nil {
		return
	}
	up := r.upstreamOf(st, it.Server)
	c.rc.MCP.ServerID, c.rc.MCP.ToolName, c.rc.MCP.ToolID, c.rc.MCP.TrustLevel = it.Server, it.UpstreamName, it.ID, up.trust
	c.rc.TokenHandling.Mode = r.tokenMode(st, it.Server)
	if e := st.owner[it.Server]; e != nil {
		c.rc.Sandbox = e.sandbox
	}
}

// recordDecision puts a decision into the caller's receipt.
func (r *Runtime) recordDecision(ctx context.Context, d policy.Decision) {
	c := callerOf(ctx)
	if c == nil {
		return
	}
	c.rc.Decision = receipts.DecisionOf(d)
	c.decided = true
}

// tokenMode is the credential handling toward an upstream: a token
// exchanged per caller (RFC 8693), a configured (vault/env-sourced)
// credential, or none. The client's token is never forwarded (spec 001
// MUST 5).
func (r *Runtime) tokenMode(st *state, server string) string {
	if e := st.owner[server]; e != nil {
		return e.tokenMode
	}
	return receipts.TokenNone
}

// authorize is the authz step of an invocation: incident state, policy,
// approvals. It returns the wire error of a refusal.
func (r *Runtime) authorize(ctx context.Context, st *state, it *catalog.Item, rawArgs json.RawMessage, dry bool) *Error {
	_, e := r.authorizeDecided(ctx, st, it, rawArgs, dry)
	return e
}

// authorizeDecided is authorize that also returns the policy's decision
// (whether the call needs a capability token).
func (r *Runtime) authorizeDecided(ctx context.Context, st *state, it *catalog.Item, rawArgs json.RawMessage, dry bool) (policy.Decision, *Error) {
	r.recordItem(ctx, st, it)
	req := r.toolRequest(ctx, st, it, policy.ActionCall)
	if !req.Egress && r.auth.incident != nil && r.auth.incident.EgressBlocked(ctx) {
		// Only under an egress block are the arguments read for hosts.
		req.Egress = namesHost(rawArgs)
	}
	d := r.auth.evaluate(ctx, req)
	r.recordDecision(ctx, d)
	return d, r.authorizeWith(ctx, it, d, rawArgs, dry)
}

// authorizeWith applies decision d to a call: allow, approvals, deny.
func (r *Runtime) authorizeWith(ctx context.Context, it *catalog.Item, d policy.Decision, rawArgs json.RawMessage, dry bool) *Error {
	if stateDenied(d) {
		return stateUnavailable(nil)
	}
	switch d.Effect {
	case policy.EffectAllow:
		return nil
	case policy.EffectRequireApproval:
		if dry || r.auth.approvals == nil {
			return newError(CodeApprovalRequired, "this call needs an operator's approval").withDetail("reason_codes", d.ReasonCodes)
		}
		p := principalOf(ctx)
		if p.IsZero() {
			return newError(CodeApprovalRequired, "this call needs an operator's approval, which needs an authenticated caller").withDetail("reason_codes", d.ReasonCodes)
		}
		h, _, err := receipts.ArgsHash(rawArgs)
		if err != nil {
			return newError(CodeArgsInvalid, "args must be a JSON object").withPath("args")
		}
		c := callerOf(ctx)
		ok, ap, err := r.auth.approvals.Check(ctx, p, it.ID, h)
		if err != nil {
			return stateUnavailable(err)
		}
		if ok {
			if c != nil {
				c.rc.Approval = receipts.Approval{Required: true, ApprovalID: ap.ID, ApprovedBy: ap.DecidedBy, StepUp: "none"}
				if !ap.DecidedAt.IsZero() {
					c.rc.Approval.ApprovedAt = ap.DecidedAt.UTC().Format(time.RFC3339)
				}
				c.rc.Decision.Result = "allow"
				c.rc.Decision.ReasonCodes = append(c.rc.Decision.ReasonCodes, ReasonApprovalGranted)
			}
			return nil
		}
		ap, err = r.auth.approvals.Request(ctx, p, it.ID, h, approvalReason(d))
		if isStateUnavailable(err) {
			return stateUnavailable(err)
		}
		if err != nil {
			return newError(CodeApprovalRequired, "this call needs an operator's approval: %v", err).withDetail("reason_codes", d.ReasonCodes)
		}
		if c != nil {
			c.rc.Approval = receipts.Approval{Required: true, ApprovalID: ap.ID, StepUp: "none"}
		}
		return newError(CodeApprovalRequired, "this call needs an operator's approval; retry the identical call once approval %s is granted", ap.ID).
			withDetail("approval_id", ap.ID).withDetail("reason_codes", d.ReasonCodes)
	default:
		return newError(CodePolicyDenied, "the policy does not allow this call").
			withDetail("reason_codes", d.ReasonCodes).withDetail("policy_id", d.PolicyID)
	}
}

// stateDenied reports whether d is the incident state's fail-closed denial.
func stateDenied(d policy.Decision) bool {
	return d.Effect == policy.EffectDeny && d.PolicyID == "incident" && slices.Contains(d.ReasonCodes, policy.ReasonStateUnavailable)
}

// approvalReason is what an approval request tells the operator: the
// policy and rule that asked for it, and the rule's reason codes.
func approvalReason(d policy.Decision) string {
	why := "policy " + d.PolicyID
	if d.RuleID != "" {
		why += ", rule " + d.RuleID
	}
	if len(d.ReasonCodes) > 0 {
		why += ": " + strings.Join(d.ReasonCodes, ", ")
	}
	return why
}
