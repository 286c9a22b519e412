package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/capability"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/toolid"
)

// Capability tokens (spec 004): the runtime asks the policy whether a call
// needs one, runtime/capability checks the one presented, and the
// capabilities/request method (or the capability_request meta-tool) grants
// them.

// The _meta keys by which a call presents a capability token and its
// proof of possession.
const (
	MetaCapability      = "dev.quiver-mcp/capability"
	MetaCapabilityProof = "dev.quiver-mcp/capability_proof"
)

// Names of the capability methods and meta-tools.
const (
	MethodCapabilitiesRequest   = "capabilities/request"
	MethodCapabilitiesAttenuate = "capabilities/attenuate"
	ToolCapabilityRequest       = "capability_request"
	ToolCapabilityAttenuate     = "capability_attenuate"
)

// JWKSPath is where the HTTP listener publishes the public keys that sign
// capability tokens.
const JWKSPath = "/.well-known/quiver-capabilities.json"

// capabilities holds what the runtime composes of runtime/capability.
type capabilities struct {
	keys   *capability.Keyring
	issuer *capability.Issuer
	store  *capability.Store
	val    *capability.Validator
	// requests are restricted principals' calls awaiting fulfilment.
	requests *capability.Requests
	// defaultLife and maxLife bound the tokens granted.
	defaultLife, maxLife time.Duration
}

// openCapabilities opens the keyring (state_dir/capability-keys.json, or
// capabilities.key_file; in memory without a state directory) and builds
// the validator on the shared state.
func (r *Runtime) openCapabilities() error {
	o := r.cfg.Capabilities
	d := config.Default().Capabilities
	if o.Issuer == "" {
		o.Issuer = d.Issuer
	}
	if o.DefaultDuration <= 0 {
		o.DefaultDuration = d.DefaultDuration
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = d.MaxDuration
	}
	if o.ProofWindow <= 0 {
		o.ProofWindow = d.ProofWindow
	}
	path := o.KeyFile
	if path == "" && r.cfg.StateDir != "" {
		path = filepath.Join(r.cfg.StateDir, "capability-keys.json")
	}
	var keys *capability.Keyring
	var err error
	if path == "" {
		keys, err = capability.NewKeyring()
	} else {
		keys, err = capability.OpenKeyring(path)
	}
	if err != nil {
		return err
	}
	maxLife := time.Duration(o.MaxDuration)
	store := capability.NewStore(r.kv, maxLife)
	val, err := capability.NewValidator(capability.ValidatorOptions{Keys: keys, Store: store, Issuer: o.Issuer, Window: time.Duration(o.ProofWindow)})
	if err != nil {
		return err
	}
	reqTTL := time.Duration(r.cfg.Approvals.TTL)
	if reqTTL <= 0 {
		reqTTL = time.Duration(config.DefaultApprovalTTL)
	}
	r.caps = &capabilities{keys: keys, issuer: &capability.Issuer{Name: o.Issuer, Keys: keys}, store: store, val: val,
		requests: capability.NewRequests(r.kv, reqTTL), defaultLife: min(time.Duration(o.DefaultDuration), maxLife), maxLife: maxLife}
	return nil
}

// serveJWKS publishes the public signing keys.
func (r *Runtime) serveJWKS(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.caps == nil {
		http.Error(w, "capability tokens are not available", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "max-age=60")
	_ = json.NewEncoder(w).Encode(r.caps.keys.JWKS())
}

// capabilityMeta reads the _meta keys of a presented capability into a.
func capabilityMeta(m mcp.Meta, a *executeArgs) *Error {
	for _, f := range []struct {
		key string
		dst *string
		max int
	}{{MetaCapability, &a.capToken, capability.MaxTokenBytes}, {MetaCapabilityProof, &a.capProof, capability.MaxProofBytes}} {
		v, ok := m[f.key]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return newError(CodeArgsInvalid, "_meta %s must be a string", f.key).withPath("_meta")
		}
		if len(s) > f.max {
			return newError(CodeArgsInvalid, "_meta %s exceeds %d bytes", f.key, f.max).withPath("_meta")
		}
		*f.dst = s
		a.capPresented = true
	}
	return nil
}

// sessionOf is the caller's MCP session id, "" for a sessionless request.
func sessionOf(ctx context.Context) string {
	if c := callerOf(ctx); c != nil && c.ss != nil && !c.sessionless {
		return c.ss.ID()
	}
	return ""
}

// recordCapability puts the capability's part into the caller's receipt.
func recordCapability(ctx context.Context, rc receipts.Capability) {
	if c := callerOf(ctx); c != nil {
		c.rc.Capability = &rc
	}
}

// checkCapability is the capability step of an execute: when the policy
// requires a token for the call, or the caller presented one, it must
// validate (runtime/capability's order). A dry run checks without using
// the token: no proof is consumed and no use counted.
func (r *Runtime) checkCapability(ctx context.Context, it *catalog.Item, a *executeArgs, need bool) (string, *Error) {
	if !need && !a.capPresented {
		return "", nil
	}
	if r.caps == nil {
		return "", newError(CodeInternal, "capability tokens are not available")
	}
	pres := capability.Presented{Token: a.capToken, Proof: a.capProof, Holder: principalOf(ctx).Key(), ToolID: it.ID,
		Args: a.Args, Session: sessionOf(ctx)}
	var c *capability.Claims
	var err error
	if a.DryRun {
		c, err = r.caps.val.Check(ctx, pres)
	} else {
		c, err = r.caps.val.Validate(ctx, pres)
	}
	var ref *capability.Refusal
	switch {
	case errors.As(err, &ref):
		recordCapability(ctx, receipts.Capability{Action: "refuse", Reason: ref.Reason, JTI: ref.JTI, JKT: ref.JKT})
		r.log.Info("capability refused", "reason", ref.Reason, "jti", ref.JTI, "tool_id", it.ID)
		return "", capabilityError(ref, it)
	case isStateUnavailable(err):
		return "", stateUnavailable(err)
	case err != nil:
		return "", newError(CodeInternal, "capability state is not available").withCause(err)
	}
	if !a.DryRun {
		recordCapability(ctx, receipts.Capability{Action: "use", JTI: c.ID, Parent: c.Parent, JKT: c.Cnf.JKT, KID: c.KID()})
	}
	return c.ID, nil
}

// specCapabilityCode is spec 004's error code for an invalid or missing
// capability. quiver answers a refused tools/call with its usual error
// result (CAPABILITY_INVALID, details.reason, details.code -32003) rather
// than a JSON-RPC error -32003: the go-sdk's client takes -32003 for its
// own "client is closing" and reports a closed connection, dropping the
// reason.
const specCapabilityCode = -32003

// capabilityError is the wire error of a refused capability: its reason
// and spec 004's code in details; a missing token says how to ask for one.
func capabilityError(ref *capability.Refusal, it *catalog.Item) *Error {
	var e *Error
	if ref.Reason == capability.ReasonMissing {
		e = newError(CodeCapabilityInvalid, "this tool needs a capability token: request one with %s (or the %s tool) for tools [%q] and your holder_key, then call with _meta %s and %s",
			MethodCapabilitiesRequest, ToolCapabilityRequest, it.ID, MetaCapability, MetaCapabilityProof).
			withDetail("request", map[string]any{"method": MethodCapabilitiesRequest, "tool": ToolCapabilityRequest, "tools": []string{it.ID}})
	} else {
		e = newError(CodeCapabilityInvalid, "capability refused (%s): %s", ref.Reason, ref.Msg)
	}
	e.withDetail("reason", ref.Reason).withDetail("code", specCapabilityCode)
	if ref.JTI != "" {
		e.withDetail("jti", ref.JTI)
	}
	return e
}

// capabilityData is the JSON-RPC error data of a CAPABILITY_INVALID that
// ends a capabilities/* request.
func capabilityData(e *Error) json.RawMessage {
	b, err := json.Marshal(map[string]any{"reason": e.Details["reason"], "details": e.Details})
	if err != nil {
		return nil
	}
	return b
}

// maxReason caps a capability request's reason, and maxHolder a holder's
// principal key.
const (
	maxReason = 1000
	maxHolder = 512
)

// capRequest is capabilities/request's parameters and capability_request's
// arguments.
type capRequest struct {
	Tools []string `json:"tools"`
	// Duration is the token's life in seconds (0: the default; capped at
	// capabilities.max_duration).
	Duration int64  `json:"duration,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// HolderKey is the holder's public key, an Ed25519 OKP JWK.
	HolderKey json.RawMessage `json:"holder_key"`
	MaxUses   int             `json:"max_uses,omitempty"`
	// Args constrains the arguments of some of the tools (JSON Schema
	// fragments by tool_id).
	Args map[string]json.RawMessage `json:"args,omitempty"`
	// BindSession binds the token to the caller's MCP session.
	BindSession bool `json:"bind_session,omitempty"`
}

// capGrant is the answer of a capability request or attenuation.
type capGrant struct {
	// Status is granted or pending.
	Status     string    `json:"status"`
	Token      string    `json:"token,omitempty"`
	JTI        string    `json:"jti,omitempty"`
	Parent     string    `json:"parent,omitempty"`
	Tools      []string  `json:"tools"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	MaxUses    int       `json:"max_uses,omitempty"`
	JKT        string    `json:"jkt,omitempty"`
	KID        string    `json:"kid,omitempty"`
	ApprovalID string    `json:"approval_id,omitempty"`
	Message    string    `json:"message"`
}

// CapabilitiesRequestParams are the parameters of capabilities/request.
type CapabilitiesRequestParams struct {
	mcp.ParamsBase
	capRequest
}

// CapabilitiesResult is the result of capabilities/request and
// capabilities/attenuate.
type CapabilitiesResult struct {
	mcp.ResultBase
	capGrant
}

var capRequestSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["tools","holder_key"],"properties":{` +
	`"tools":{"type":"array","minItems":1,"maxItems":64,"items":{"type":"string","minLength":1,"maxLength":256},"description":"tool_ids the token should grant."},` +
	`"duration":{"type":"integer","minimum":0,"description":"Seconds the token should live (default and cap set by the gateway)."},` +
	`"reason":{"type":"string","maxLength":1000,"description":"Why you need it; shown to the operator who approves."},` +
	`"holder_key":{"type":"object","description":"Your public Ed25519 key as an OKP JWK {kty:OKP, crv:Ed25519, x}; proofs are signed with its private key."},` +
	`"max_uses":{"type":"integer","minimum":0,"description":"Calls the token allows (0: unlimited)."},` +
	`"args":{"type":"object","description":"JSON Schema fragments by tool_id that the arguments must also satisfy."},` +
	`"bind_session":{"type":"boolean","description":"Bind the token to this MCP session."}}}`)

// capabilityTools are the capability meta-tools, listed when the policy
// requires capabilities for some tool.
func (r *Runtime) capabilityTools() []*mcp.Tool {
	return []*mcp.Tool{
		{Name: ToolCapabilityRequest, InputSchema: capRequestSchema,
			Description: "Request a capability token for tools that need one (their cards say requires_capability). Returns the token, or a pending approval to retry. Present it on calls in _meta dev.quiver-mcp/capability with a proof signed by your key in dev.quiver-mcp/capability_proof."},
		{Name: ToolCapabilityAttenuate, InputSchema: capAttenuateSchema,
			Description: "Derive a narrower capability token from one you hold (fewer tools, earlier expiry, fewer uses, tighter argument constraints), for another principal or key."},
	}
}

// syncCapabilityTools lists the capability meta-tools while the policy
// requires capabilities, and removes them when it no longer does.
func (r *Runtime) syncCapabilityTools() {
	if r.server == nil {
		return
	}
	var p *policy.Policy
	if r.auth.policy != nil {
		p = r.auth.policy.Policy()
	}
	if p.RequiresCapabilities() {
		r.server.AddTool(r.capabilityTools()[0], r.handleCapabilityRequest)
		r.server.AddTool(r.capabilityTools()[1], r.handleCapabilityAttenuate)
	} else {
		r.server.RemoveTools(ToolCapabilityRequest, ToolCapabilityAttenuate)
	}
	if p.SeparatesPrivileges() {
		r.server.AddTool(toolRequestsTool, r.handleToolRequests)
		r.server.AddTool(toolFulfilTool, r.handleToolFulfil)
	} else {
		r.server.RemoveTools(ToolRequests, ToolFulfil)
	}
}

// policyListsTools reports whether the policy in force adds meta-tools
// (capabilities, tool requests), which a policy reload may change.
func (r *Runtime) policyListsTools() bool {
	if r.auth.policy == nil {
		return false
	}
	p := r.auth.policy.Policy()
	return p.RequiresCapabilities() || p.SeparatesPrivileges()
}

// registerCapabilityMethods adds the custom MCP methods.
func (r *Runtime) registerCapabilityMethods(s *mcp.Server) error {
	if err := mcp.AddReceivingCustomMethod(s, MethodCapabilitiesRequest, func(ctx context.Context, _ *mcp.ServerSession, p *CapabilitiesRequestParams) (*CapabilitiesResult, error) {
		g, e := r.requestCapability(ctx, &p.capRequest)
		if e != nil {
			return nil, e
		}
		return &CapabilitiesResult{capGrant: g}, nil
	}); err != nil {
		return err
	}
	return mcp.AddReceivingCustomMethod(s, MethodCapabilitiesAttenuate, func(ctx context.Context, _ *mcp.ServerSession, p *CapabilitiesAttenuateParams) (*CapabilitiesResult, error) {
		g, e := r.attenuateCapability(ctx, &p.capAttenuate)
		if e != nil {
			return nil, e
		}
		return &CapabilitiesResult{capGrant: g}, nil
	})
}

func (r *Runtime) handleCapabilityRequest(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolCapabilityRequest, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a capRequest
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		g, e := r.requestCapability(ctx, &a)
		if e != nil {
			return nil, e
		}
		return structured(g, ""), nil
	})
}

// requestCapability decides a capability request by the policy: every
// tool must be one the caller may call; the grant is at once unless an
// access rule makes it wait for an operator (the approvals queue), and an
// identical request retried after the operator granted it returns the
// token.
func (r *Runtime) requestCapability(ctx context.Context, a *capRequest) (capGrant, *Error) {
	if r.caps == nil {
		return capGrant{}, newError(CodeInternal, "capability tokens are not available")
	}
	p := principalOf(ctx)
	if p.IsZero() {
		return capGrant{}, newError(CodeCapabilityRequestDenied, "a capability is granted to an authenticated principal only")
	}
	key, e := holderKey(a.HolderKey)
	if e != nil {
		return capGrant{}, e
	}
	st := r.state.Load()
	tools, items, e := r.resolveTools(ctx, st, a.Tools)
	if e != nil {
		return capGrant{}, e
	}
	if e := checkConstraints(a.Args, tools); e != nil {
		return capGrant{}, e
	}
	if a.Duration < 0 || a.MaxUses < 0 {
		return capGrant{}, newError(CodeArgsInvalid, "duration and max_uses must not be negative")
	}
	if len(a.Reason) > maxReason {
		return capGrant{}, newError(CodeArgsInvalid, "reason exceeds %d bytes", maxReason).withPath("reason")
	}
	life := r.caps.defaultLife
	if a.Duration > 0 {
		life = min(time.Duration(a.Duration)*time.Second, r.caps.maxLife)
	}
	session := ""
	if a.BindSession {
		if session = sessionOf(ctx); session == "" {
			return capGrant{}, newError(CodeArgsInvalid, "bind_session: this request has no MCP session to bind to").withPath("bind_session")
		}
	}
	var denied []string
	approval := false
	for _, it := range items {
		d := r.decide(ctx, st, it, policy.ActionCall)
		if stateDenied(d) {
			return capGrant{}, stateUnavailable(nil)
		}
		if d.Effect == policy.EffectDeny {
			denied = append(denied, it.ID)
		}
		approval = approval || d.CapabilityApproval
	}
	if len(denied) > 0 {
		recordCapability(ctx, receipts.Capability{Action: "refuse", Reason: "policy"})
		return capGrant{}, newError(CodeCapabilityRequestDenied, "the policy does not let you hold a capability for %d of the tools", len(denied)).withDetail("tools", denied)
	}
	jkt, _ := key.Thumbprint()
	g := capability.Grant{Holder: p.Key(), Key: key, Tools: tools, ExpiresAt: time.Now().Add(life), MaxUses: a.MaxUses, Args: a.Args, Session: session}
	grantedBy := "policy"
	if approval {
		if r.auth.approvals == nil {
			return capGrant{}, newError(CodeCapabilityRequestDenied, "this capability needs an operator's approval, and approvals are not available")
		}
		label, fp := requestFingerprint(tools, a, jkt, session)
		ok, ap, err := r.auth.approvals.Check(ctx, p, label, fp)
		if err != nil {
			return capGrant{}, stateUnavailable(err)
		}
		if !ok {
			if ap.Status == policy.ApprovalDenied {
				recordCapability(ctx, receipts.Capability{Action: "refuse", Reason: "denied", JKT: jkt})
				return capGrant{}, newError(CodeCapabilityRequestDenied, "an operator denied this capability request (%s)", ap.ID).withDetail("approval_id", ap.ID)
			}
			if ap.ID == "" || ap.Status != policy.ApprovalPending {
				why := "capability request"
				if a.Reason != "" {
					why += ": " + a.Reason
				}
				if ap, err = r.auth.approvals.Request(ctx, p, label, fp, why); err != nil {
					if isStateUnavailable(err) {
						return capGrant{}, stateUnavailable(err)
					}
					return capGrant{}, newError(CodeCapabilityRequestDenied, "the request cannot be queued: %v", err)
				}
			}
			pr := capability.PendingRequest{ApprovalID: ap.ID, Requester: p.Key(), Tools: tools, Duration: a.Duration, MaxUses: a.MaxUses,
				Reason: a.Reason, JKT: jkt, At: ap.RequestedAt}
			if err := r.caps.store.SavePending(ctx, pr, time.Until(ap.ExpiresAt)+time.Minute); err != nil {
				return capGrant{}, stateUnavailable(err)
			}
			recordCapability(ctx, receipts.Capability{Action: "pending", JKT: jkt, RequestID: ap.ID})
			if c := callerOf(ctx); c != nil {
				c.rc.Approval = receipts.Approval{Required: true, ApprovalID: ap.ID, StepUp: "none"}
			}
			return capGrant{Status: "pending", Tools: tools, JKT: jkt, ApprovalID: ap.ID,
				Message: "an operator must approve this capability request (quiver admin approvals grant " + ap.ID + "); then send the identical request again for the token"}, nil
		}
		grantedBy = ap.DecidedBy
		if c := callerOf(ctx); c != nil {
			c.rc.Approval = receipts.Approval{Required: true, ApprovalID: ap.ID, ApprovedBy: ap.DecidedBy, StepUp: "none"}
		}
	}
	return r.issue(ctx, g, grantedBy, "grant")
}

// issue signs a grant, keeps its record and receipts it.
func (r *Runtime) issue(ctx context.Context, g capability.Grant, grantedBy, action string) (capGrant, *Error) {
	kid := r.caps.keys.CurrentKID()
	if revoked, err := r.caps.store.KeyRevoked(ctx, kid); err != nil {
		return capGrant{}, stateUnavailable(err)
	} else if revoked {
		return capGrant{}, newError(CodeInternal, "the gateway's signing key is revoked; an operator must rotate it")
	}
	tok, c, err := r.caps.issuer.Issue(g)
	if err != nil {
		return capGrant{}, newError(CodeArgsInvalid, "%v", err).withCause(err)
	}
	if err := r.caps.store.Record(ctx, capability.RecordOf(c, kid, grantedBy), time.Now()); err != nil {
		return capGrant{}, stateUnavailable(err)
	}
	recordCapability(ctx, receipts.Capability{Action: action, JTI: c.ID, Parent: c.Parent, JKT: c.Cnf.JKT, KID: kid})
	r.log.Info("capability issued", "action", action, "jti", c.ID, "holder", c.Subject, "jkt", c.Cnf.JKT, "tools", len(c.Tools), "parent", c.Parent)
	return capGrant{Status: "granted", Token: tok, JTI: c.ID, Parent: c.Parent, Tools: c.Tools, ExpiresAt: c.ExpiresAt.Time, MaxUses: c.MaxUses,
		JKT: c.Cnf.JKT, KID: kid, Message: "present the token in _meta " + MetaCapability + " with a fresh proof in " + MetaCapabilityProof + " on every call"}, nil
}

// holderKey parses a request's holder key.
func holderKey(raw json.RawMessage) (capability.JWK, *Error) {
	if len(raw) == 0 {
		return capability.JWK{}, newError(CodeArgsInvalid, "holder_key is required: your public Ed25519 key as an OKP JWK").withPath("holder_key")
	}
	k, err := capability.ParseJWK(raw)
	if err != nil {
		return capability.JWK{}, newError(CodeArgsInvalid, "holder_key: %v", err).withPath("holder_key")
	}
	return k, nil
}

// resolveTools turns requested tool refs into catalog tools the caller may
// see, by canonical tool_id, sorted and without duplicates.
func (r *Runtime) resolveTools(ctx context.Context, st *state, refs []string) ([]string, []*catalog.Item, *Error) {
	if len(refs) == 0 || len(refs) > capability.MaxTools {
		return nil, nil, newError(CodeArgsInvalid, "tools must name 1 to %d tools", capability.MaxTools).withPath("tools")
	}
	byID := map[string]*catalog.Item{}
	for _, ref := range refs {
		it, ok := lookupTool(st, ref)
		if !ok || it.Kind != toolid.KindTool || !r.visible(ctx, st, it) {
			return nil, nil, newError(CodeHydrateFailed, "no tool with id %q in the current catalog", ref).withPath("tools")
		}
		byID[it.ID] = it
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	items := make([]*catalog.Item, 0, len(ids))
	for _, id := range ids {
		items = append(items, byID[id])
	}
	return ids, items, nil
}

// checkConstraints compiles the argument constraints of a request: each
// names a granted tool and is a JSON Schema.
func checkConstraints(args map[string]json.RawMessage, tools []string) *Error {
	for tool, frag := range args {
		if !slices.Contains(tools, tool) {
			return newError(CodeArgsInvalid, "args names %q, which is not among the tools", tool).withPath("args")
		}
		if _, err := capability.CompileConstraint(frag); err != nil {
			return newError(CodeArgsInvalid, "args of %q: %v", tool, err).withPath("args")
		}
	}
	return nil
}

// requestFingerprint is the approval's tool label and argument hash of a
// capability request: an identical request finds the same approval.
func requestFingerprint(tools []string, a *capRequest, jkt, session string) (string, string) {
	b, _ := json.Marshal(map[string]any{"tools": tools, "duration": a.Duration, "jkt": jkt, "max_uses": a.MaxUses, "args": a.Args, "session": session})
	sum := sha256.Sum256(b)
	label := "capability:" + strings.Join(tools, ",")
	if len(label) > 200 {
		label = label[:200] + "…"
	}
	return label, hex.EncodeToString(sum[:])
}

// capAttenuate is capabilities/attenuate's parameters and
// capability_attenuate's arguments.
type capAttenuate struct {
	// Token is the parent token; Proof a proof of possession of it for
	// tool_id "capabilities/attenuate" over the arguments {}.
	Token string `json:"token"`
	Proof string `json:"proof"`
	// Tools, Duration (seconds from now), MaxUses and Args narrow the
	// parent (see capability.Narrowing).
	Tools    []string                   `json:"tools,omitempty"`
	Duration int64                      `json:"duration,omitempty"`
	MaxUses  int                        `json:"max_uses,omitempty"`
	Args     map[string]json.RawMessage `json:"args,omitempty"`
	// Holder is the new holder's principal key ("jwt:<issuer>:<sub>");
	// absent: the caller. HolderKey is its public key.
	Holder    string          `json:"holder,omitempty"`
	HolderKey json.RawMessage `json:"holder_key"`
}

// CapabilitiesAttenuateParams are the parameters of
// capabilities/attenuate.
type CapabilitiesAttenuateParams struct {
	mcp.ParamsBase
	capAttenuate
}

var capAttenuateSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["token","proof","holder_key"],"properties":{` +
	`"token":{"type":"string","minLength":1,"description":"The capability token you hold."},` +
	`"proof":{"type":"string","minLength":1,"description":"A proof of possession of it for tool_id \"capabilities/attenuate\" over the arguments {}."},` +
	`"tools":{"type":"array","maxItems":64,"items":{"type":"string"},"description":"A subset of its tools (default: all)."},` +
	`"duration":{"type":"integer","minimum":0,"description":"Seconds from now; must end before the parent does (default: the parent's expiry)."},` +
	`"max_uses":{"type":"integer","minimum":0,"description":"Uses handed over (taken from the parent when it has a limit)."},` +
	`"args":{"type":"object","description":"Further JSON Schema constraints by tool_id."},` +
	`"holder":{"type":"string","maxLength":512,"description":"The new holder's principal key, e.g. jwt:<issuer>:<sub> (default: you)."},` +
	`"holder_key":{"type":"object","description":"The new holder's public Ed25519 key (OKP JWK)."}}}`)

func (r *Runtime) handleCapabilityAttenuate(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolCapabilityAttenuate, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a capAttenuate
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		g, e := r.attenuateCapability(ctx, &a)
		if e != nil {
			return nil, e
		}
		return structured(g, ""), nil
	})
}

// attenuateCapability derives a narrower token from one the caller holds
// and proves it holds. It never widens (CAPABILITY_REQUEST_DENIED), takes
// the child's uses from a limited parent, and records the chain.
func (r *Runtime) attenuateCapability(ctx context.Context, a *capAttenuate) (capGrant, *Error) {
	if r.caps == nil {
		return capGrant{}, newError(CodeInternal, "capability tokens are not available")
	}
	p := principalOf(ctx)
	key, e := holderKey(a.HolderKey)
	if e != nil {
		return capGrant{}, e
	}
	parent, err := r.caps.val.Possess(ctx, capability.Presented{Token: a.Token, Proof: a.Proof, Holder: p.Key(),
		ToolID: MethodCapabilitiesAttenuate, Session: sessionOf(ctx)})
	var ref *capability.Refusal
	switch {
	case errors.As(err, &ref):
		recordCapability(ctx, receipts.Capability{Action: "refuse", Reason: ref.Reason, JTI: ref.JTI, JKT: ref.JKT})
		e := newError(CodeCapabilityInvalid, "capability refused (%s): %s", ref.Reason, ref.Msg).withDetail("reason", ref.Reason).withDetail("code", specCapabilityCode)
		return capGrant{}, e
	case isStateUnavailable(err):
		return capGrant{}, stateUnavailable(err)
	case err != nil:
		return capGrant{}, newError(CodeInternal, "capability state is not available").withCause(err)
	}
	holder := a.Holder
	if holder == "" {
		holder = p.Key()
	}
	if len(holder) > maxHolder {
		return capGrant{}, newError(CodeArgsInvalid, "holder exceeds %d bytes", maxHolder).withPath("holder")
	}
	if a.Duration < 0 {
		return capGrant{}, newError(CodeArgsInvalid, "duration must not be negative").withPath("duration")
	}
	now := time.Now()
	n := capability.Narrowing{Holder: holder, Key: key, MaxUses: a.MaxUses, Args: a.Args}
	if len(a.Tools) > 0 {
		st := r.state.Load()
		// Refs resolve to tool_ids as in a request; visibility is the
		// parent's business (it was granted), so unknown names are
		// compared as given.
		for _, ref := range a.Tools {
			id := ref
			if it, ok := lookupTool(st, ref); ok {
				id = it.ID
			}
			n.Tools = append(n.Tools, id)
		}
	}
	if a.Duration > 0 {
		n.ExpiresAt = now.Add(time.Duration(a.Duration) * time.Second)
	}
	for tool, frag := range a.Args {
		if _, err := capability.CompileConstraint(frag); err != nil {
			return capGrant{}, newError(CodeArgsInvalid, "args of %q: %v", tool, err).withPath("args")
		}
	}
	g, err := capability.Attenuate(parent, n, now)
	if err != nil {
		recordCapability(ctx, receipts.Capability{Action: "refuse", Reason: "widening", JTI: parent.ID, JKT: parent.Cnf.JKT})
		return capGrant{}, newError(CodeCapabilityRequestDenied, "%v", err).withDetail("parent", parent.ID)
	}
	ok, err := r.caps.store.Delegate(ctx, parent, g.MaxUses, now)
	if err != nil {
		return capGrant{}, stateUnavailable(err)
	}
	if !ok {
		recordCapability(ctx, receipts.Capability{Action: "refuse", Reason: capability.ReasonUsesExhausted, JTI: parent.ID, JKT: parent.Cnf.JKT})
		return capGrant{}, newError(CodeCapabilityRequestDenied, "the parent token has fewer than %d uses left", g.MaxUses).withDetail("parent", parent.ID)
	}
	return r.issue(ctx, g, p.Key(), "attenuate")
}
