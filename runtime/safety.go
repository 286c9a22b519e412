package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/toolid"
)

// The safety profile (spec 001): who the caller is (identity), what it may
// see and call (policy, incident state, approvals), and one receipt per
// request.

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
)

// caller is the principal of one request and the receipt being built for
// it; it travels in the request's context.
type caller struct {
	// p is the principal: a verified JWT principal, the local principal
	// (stdio), or zero for an anonymous HTTP session.
	p identity.Principal
	// jwt is true for a verified token's principal.
	jwt bool
	// subject is the verified token itself (redacting), kept only for
	// RFC 8693 token exchange; nil for stdio and anonymous callers.
	subject *identity.SubjectToken
	ss      *mcp.ServerSession
	// progress is the request's progress token (nil when it has none).
	progress any
	rc       receipts.Receipt
	// decided is set once the pipeline recorded the decision in rc.
	decided bool
	// guardCodes are the reason codes an argument guard (argguard.go)
	// refused the call with; a deny receipt lists them after the error
	// code.
	guardCodes []string
}

type callerKey struct{}

func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// newCaller resolves who made a request: the principal the identity
// middleware put in the session's token info (HTTP with auth), the local
// principal (stdio), or no one (HTTP without auth: the session is its own
// anonymous principal).
func (r *Runtime) newCaller(extra *mcp.RequestExtra, ss *mcp.ServerSession) *caller {
	c := &caller{ss: ss}
	if extra != nil && extra.TokenInfo != nil {
		if p, ok := identity.FromTokenInfo(extra.TokenInfo); ok {
			c.p, c.jwt = p, true
			c.subject = identity.SubjectTokenFromTokenInfo(extra.TokenInfo)
			return c
		}
	}
	if ss == nil || ss.ID() == "" {
		c.p = r.local
	}
	return c
}

// withCaller attaches c to ctx.
func withCaller(ctx context.Context, c *caller) context.Context {
	ctx = context.WithValue(ctx, callerKey{}, c)
	if !c.p.IsZero() {
		ctx = identity.WithPrincipal(ctx, c.p)
		ctx = identity.WithSubjectToken(ctx, c.subject)
	}
	return ctx
}

// principalOf returns the caller's principal (zero when anonymous).
func principalOf(ctx context.Context) identity.Principal {
	if c := callerOf(ctx); c != nil {
		return c.p
	}
	return identity.Principal{}
}

// startReceipt begins the receipt of one meta-tool call.
func (r *Runtime) startReceipt(c *caller, method string, args json.RawMessage, now time.Time) {
	c.rc = receipts.New(method, now)
	if !c.p.IsZero() {
		c.rc.Principal = receipts.PrincipalOf(c.p)
	}
	if c.ss != nil {
		c.rc.MCP.SessionID = c.ss.ID()
	}
	if h, n, err := receipts.ArgsHash(args); err == nil {
		c.rc.Request.ArgsHash, c.rc.Request.SizeBytesIn = h, n
	} else {
		c.rc.Request.SizeBytesIn = int64(len(args))
	}
}

// finishReceipt completes and emits the receipt of one meta-tool call.
func (r *Runtime) finishReceipt(c *caller, res *mcp.CallToolResult, e *Error, took time.Duration) {
	rc := &c.rc
	switch {
	case e != nil && (!c.decided || (rc.Decision.Result == "allow" && e.refusal())):
		// A refusal by the gateway: before or after the policy allowed it.
		codes := append([]string{e.Code}, c.guardCodes...)
		if c.decided {
			codes = append(codes, rc.Decision.ReasonCodes...)
		}
		rc.Decision.Result, rc.Decision.ReasonCodes = "deny", codes
		if rc.Decision.PolicyID == "" {
			rc.Decision.PolicyID = r.policyID()
		}
	case !c.decided:
		rc.Decision = receipts.Decision{Result: "allow", PolicyID: r.policyID(), ReasonCodes: []string{r.allowReason()}}
	}
	rc.Outcome.DurationMS = float64(took.Microseconds()) / 1000
	switch {
	case e != nil:
		rc.Outcome.Status, rc.Outcome.ErrorCode = receipts.StatusError, e.Code
		if e.timedOut() {
			rc.Outcome.Status = receipts.StatusTimeout
		}
	case res != nil && res.IsError:
		rc.Outcome.Status, rc.Outcome.ErrorCode = receipts.StatusError, CodeToolError
	default:
		rc.Outcome.Status = receipts.StatusSuccess
	}
	if res != nil {
		if b, err := json.Marshal(res); err == nil {
			rc.Outcome.SizeBytesOut = int64(len(b))
		}
	}
	r.emit(*rc)
}

// emit writes a receipt, with the incident flag of the moment.
func (r *Runtime) emit(rc receipts.Receipt) {
	if r.receipts == nil {
		return
	}
	if r.incident != nil {
		rc.IncidentMode = rc.IncidentMode || r.incident.Active()
	}
	r.receipts.Emit(rc)
}

func (r *Runtime) policyID() string {
	if r.policy == nil {
		return "none"
	}
	if p := r.policy.Policy(); p != nil {
		return p.ID
	}
	return "none"
}

func (r *Runtime) allowReason() string {
	if r.policy == nil {
		return ReasonNoPolicyConfigured
	}
	return policy.ReasonAllowed
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
	return req
}

// decide asks the incident state, then the policy, about one item.
func (r *Runtime) decide(ctx context.Context, st *state, it *catalog.Item, action string) policy.Decision {
	req := r.toolRequest(ctx, st, it, action)
	if r.incident != nil {
		if d := r.incident.Evaluate(req); d.Denied {
			codes := []string{policy.ReasonDenied, d.Code}
			if d.RuleID != "" {
				codes = append(codes, "kill_rule:"+d.RuleID)
			}
			return policy.Decision{Effect: policy.EffectDeny, PolicyID: "incident", ReasonCodes: codes}
		}
	}
	if r.policy == nil {
		return policy.Decision{Effect: policy.EffectAllow, PolicyID: "none", ReasonCodes: []string{ReasonNoPolicyConfigured}}
	}
	return r.policy.Decide(req)
}

// visible reports whether the caller may see an item.
func (r *Runtime) visible(ctx context.Context, st *state, it *catalog.Item) bool {
	if r.policy == nil && r.incident == nil {
		return true
	}
	return r.decide(ctx, st, it, policy.ActionList).Visible()
}

// filtering reports whether visibility depends on the caller at all.
func (r *Runtime) filtering() bool { return r.policy != nil || r.incident != nil }

// recordDecision puts a decision and the item into the caller's receipt.
func (r *Runtime) recordItem(ctx context.Context, st *state, it *catalog.Item) {
	c := callerOf(ctx)
	if c == nil {
		return
	}
	up := r.upstreamOf(st, it.Server)
	c.rc.MCP.ServerID, c.rc.MCP.ToolName, c.rc.MCP.ToolID, c.rc.MCP.TrustLevel = it.Server, it.UpstreamName, it.ID, up.trust
	c.rc.TokenHandling.Mode = r.tokenMode(st, it.Server)
}

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
	c, ok := st.owner[server]
	if !ok {
		return receipts.TokenNone
	}
	for _, u := range r.opts.Upstreams {
		if u.Name != c.name() {
			continue
		}
		switch {
		case u.Exchange != nil && u.Catalog == nil:
			return receipts.TokenExchanged
		case u.Credentialed:
			return receipts.TokenVault
		}
	}
	return receipts.TokenNone
}

// authorize is the authz step of an invocation: incident state, policy,
// approvals. It returns the wire error of a refusal.
func (r *Runtime) authorize(ctx context.Context, st *state, it *catalog.Item, rawArgs json.RawMessage, dry bool) *Error {
	r.recordItem(ctx, st, it)
	d := r.decide(ctx, st, it, policy.ActionCall)
	r.recordDecision(ctx, d)
	switch d.Effect {
	case policy.EffectAllow:
		return nil
	case policy.EffectRequireApproval:
		if dry || r.approvals == nil {
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
		if ok, ap := r.approvals.Check(p, it.ID, h); ok {
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
		ap, err := r.approvals.Request(p, it.ID, h)
		if err != nil && !errors.Is(err, policy.ErrNotPersisted) {
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

// tokenKeys are argument names that carry credentials.
var tokenKeys = map[string]bool{
	"authorization": true, "accesstoken": true, "bearer": true, "bearertoken": true, "apikey": true,
	"idtoken": true, "refreshtoken": true, "token": true, "authtoken": true, "clientsecret": true, "xapikey": true,
}

var tokenShape = regexp.MustCompile(`^(?i:bearer\s+)?[A-Za-z0-9._~+/=-]{16,}$`)

// clientToken reports whether decoded arguments carry a token-like value
// under a credential-like key (searched three levels deep).
func clientToken(v any, depth int) bool {
	if depth > 3 {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			norm := strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(k))
			if s, ok := x.(string); ok && tokenKeys[norm] && tokenShape.MatchString(strings.TrimSpace(s)) {
				return true
			}
			if clientToken(x, depth+1) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if clientToken(x, depth+1) {
				return true
			}
		}
	}
	return false
}

// blockClientToken refuses a call whose arguments carry a client token: the
// credential boundary (spec 001 MUST 5) admits upstream credentials only
// from the upstream's own configuration. Nothing was forwarded, so the
// receipt says blocked with passthrough_detected false.
func blockClientToken(ctx context.Context) *Error {
	if c := callerOf(ctx); c != nil {
		c.rc.TokenHandling = receipts.TokenHandling{Mode: receipts.TokenBlocked}
	}
	return newError(CodeClientCredentialRejected, "the arguments carry a credential; quiver never forwards client credentials upstream").
		withDetail("reason_codes", []string{ReasonClientToken})
}

// listed are the list methods listFilter shapes.
var listed = map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true, "resources/templates/list": true}

// listFilter is the receiving middleware that shapes the list methods per
// caller (spec 001 MUST 3): the go-sdk's listings are global, so entries
// the caller may not see are removed from each page. Every listing gets a
// receipt.
func (r *Runtime) listFilter(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !listed[method] {
			return next(ctx, method, req)
		}
		start := time.Now()
		ss, _ := req.GetSession().(*mcp.ServerSession)
		c := r.newCaller(req.GetExtra(), ss)
		r.startReceipt(c, method, nil, start)
		res, err := next(ctx, method, req)
		if err != nil {
			r.finishList(c, nil, newError(CodeInternal, "%s failed", method), time.Since(start))
			return res, err
		}
		if r.filtering() && res != nil {
			res = r.filterList(withCaller(ctx, c), res)
		}
		r.finishList(c, res, nil, time.Since(start))
		return res, nil
	}
}

// filterList removes from one page of a listing what the caller may not
// see. Entries that are not catalog items (the meta-tools) stay.
func (r *Runtime) filterList(ctx context.Context, res mcp.Result) mcp.Result {
	st := r.state.Load()
	hidden := func(id string, kind toolid.Kind) bool {
		it, ok := st.snap.Lookup(id)
		return ok && it.Kind == kind && !r.visible(ctx, st, it)
	}
	switch lr := res.(type) {
	case *mcp.ListToolsResult:
		out := *lr
		out.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool {
			id := t.Name
			if d, ok := st.exp.tools[t.Name]; ok {
				id = d
			}
			return hidden(id, toolid.KindTool)
		})
		return &out
	case *mcp.ListPromptsResult:
		out := *lr
		out.Prompts = slices.DeleteFunc(slices.Clone(lr.Prompts), func(p *mcp.Prompt) bool {
			return hidden(st.exp.prompts[p.Name], toolid.KindPrompt)
		})
		return &out
	case *mcp.ListResourcesResult:
		out := *lr
		out.Resources = slices.DeleteFunc(slices.Clone(lr.Resources), func(rs *mcp.Resource) bool {
			return hidden(st.exp.resources[rs.URI], toolid.KindResource)
		})
		return &out
	case *mcp.ListResourceTemplatesResult:
		out := *lr
		out.ResourceTemplates = slices.DeleteFunc(slices.Clone(lr.ResourceTemplates), func(t *mcp.ResourceTemplate) bool {
			o, ok := st.exp.templates[t.URITemplate]
			return ok && !r.visible(ctx, st, templateItem(o.owner.name(), t.URITemplate))
		})
		return &out
	}
	return res
}

// finishList emits the receipt of one listing.
func (r *Runtime) finishList(c *caller, res mcp.Result, e *Error, took time.Duration) {
	var tr *mcp.CallToolResult
	if res != nil {
		tr = &mcp.CallToolResult{}
		if b, err := json.Marshal(res); err == nil {
			tr.StructuredContent = json.RawMessage(b)
		}
	}
	r.finishReceipt(c, tr, e, took)
}

// openSafety opens what Start owns of the safety profile: the incident
// state, the approvals, the receipts writer and the admin API.
func (r *Runtime) openSafety(ctx context.Context) error {
	o := r.opts
	sub := func(name string) (string, error) {
		if o.StateDir == "" {
			return "", nil
		}
		d := filepath.Join(o.StateDir, name)
		return d, os.MkdirAll(d, 0o700)
	}
	var err error
	dir := ""
	if o.IncidentPersist {
		if dir, err = sub("incident"); err != nil {
			return fmt.Errorf("incident state: %w", err)
		}
	}
	if r.incident, err = policy.OpenIncident(policy.IncidentOptions{Dir: dir}); err != nil {
		return fmt.Errorf("incident state: %w", err)
	}
	if dir, err = sub("approvals"); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	if r.approvals, err = policy.OpenApprovals(policy.ApprovalOptions{Dir: dir, TTL: o.ApprovalTTL, MaxPending: o.ApprovalMaxPending}); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	if !o.ReceiptsOff {
		if dir, err = sub(receipts.DirName); err != nil {
			return fmt.Errorf("receipts: %w", err)
		}
		if dir == "" && o.ReceiptsCopy == nil {
			r.log.Warn("no state directory: receipts are not written")
		}
		if r.receipts, err = receipts.NewWriter(receipts.WriterOptions{Dir: dir, Copy: o.ReceiptsCopy, Logger: r.log}); err != nil {
			return fmt.Errorf("receipts: %w", err)
		}
	}
	if o.PolicyFile != "" {
		interval := o.PolicyWatchInterval
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			_ = r.policy.Watch(ctx, o.PolicyFile, policy.WatchOptions{Interval: interval, OnChange: func(p *policy.Policy, err error) {
				if err != nil {
					r.log.Error("policy file not reloaded; the policy in force stays", "file", o.PolicyFile, "err", err)
					return
				}
				r.log.Info("policy reloaded", "policy_id", p.ID, "version", p.Version)
			}})
		}()
	} else if r.policy == nil {
		r.log.Warn("no policy configured: every principal sees and calls every tool; configure policy.file for default-deny authorization")
	}
	if len(o.AdminToken) > 0 || o.AdminClaim != nil {
		ao := admin.Options{Incident: r.incident, Approvals: r.approvals, Token: o.AdminToken, Logger: r.log,
			OnAction: r.adminReceipt, OnDeny: func(req *http.Request, reason string) { r.denyReceipt(req, reason) }}
		if o.AdminClaim != nil && r.verifier != nil {
			ao.Verifier, ao.AdminClaim = r.verifier, *o.AdminClaim
		}
		if r.admin, err = admin.New(ao); err != nil {
			return err
		}
	}
	return nil
}

// closeSafety flushes the receipts and closes the stores.
func (r *Runtime) closeSafety() error {
	var errs []error
	if r.receipts != nil {
		errs = append(errs, r.receipts.Close())
	}
	if r.approvals != nil {
		errs = append(errs, r.approvals.Close())
	}
	return errors.Join(errs...)
}

// denyReceipt records an HTTP request refused before MCP routing.
func (r *Runtime) denyReceipt(req *http.Request, reason string) {
	rc := receipts.New("http", time.Now())
	rc.Decision = receipts.Decision{Result: "deny", PolicyID: "authn", ReasonCodes: []string{CodeUnauthenticated, reason}}
	rc.Outcome = receipts.Outcome{Status: receipts.StatusError, ErrorCode: CodeUnauthenticated, Message: req.Method + " " + req.URL.Path}
	if req.ContentLength > 0 {
		rc.Request.SizeBytesIn = req.ContentLength
	}
	r.emit(rc)
}

// adminReceipt records an operator action of the admin API.
func (r *Runtime) adminReceipt(req *http.Request, a admin.Action) {
	rc := receipts.New(a.Method, time.Now())
	rc.Principal = receipts.Principal{Sub: a.Operator, ActorType: identity.ActorSystem}
	if !a.Principal.IsZero() {
		rc.Principal = receipts.PrincipalOf(a.Principal)
	}
	rc.MCP.ToolID = a.Target
	rc.Decision = receipts.Decision{Result: "allow", PolicyID: "admin", ReasonCodes: []string{"ADMIN_AUTHENTICATED"}}
	rc.Outcome.Status = receipts.StatusSuccess
	if a.Status >= 400 {
		rc.Outcome.Status, rc.Outcome.ErrorCode = receipts.StatusError, a.Err
	}
	rc.Outcome.Message = fmt.Sprintf("%s %s -> %d", req.Method, req.URL.Path, a.Status)
	r.emit(rc)
}

// stripAuthorization removes the client's Authorization header before the
// MCP handler, so no code path can forward it (spec 001 MUST 5); the
// identity middleware does the same when auth is configured.
func stripAuthorization(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Header.Del("Authorization")
		h.ServeHTTP(w, req)
	})
}

// initIdentity builds the verifier (with issuers), the local principal and
// the policy engine; New calls it, so bad settings fail before Start.
func (r *Runtime) initIdentity() error {
	local := r.opts.Auth.Local
	if local.Sub == "" {
		local.Sub = r.opts.LocalPrincipal
	} else {
		r.opts.LocalPrincipal = local.Sub
	}
	r.local = local.Principal()
	if len(r.opts.Auth.Issuers) > 0 {
		cfg := r.opts.Auth
		cfg.Local = local
		getenv := r.opts.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		v, err := identity.NewVerifier(cfg, identity.Options{Getenv: getenv, Logger: r.log, Revoked: func(jti, sub string) bool {
			in := r.incident
			return in != nil && in.Revoked(jti, sub)
		}})
		if err != nil {
			return fmt.Errorf("runtime: auth: %w", err)
		}
		r.verifier = v
	}
	switch {
	case r.opts.PolicyFile != "":
		p, err := policy.Load(r.opts.PolicyFile)
		if err != nil {
			return fmt.Errorf("runtime: policy: %w", err)
		}
		r.policy = policy.NewEngine(p)
	case r.opts.Policy != nil:
		r.policy = policy.NewEngine(r.opts.Policy)
	}
	return nil
}
