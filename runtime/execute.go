package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/firewall"
	"github.com/quiver-mcp/quiver/runtime/argguard"
	"github.com/quiver-mcp/quiver/runtime/controls"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// executeArgs are tool_execute's arguments (schemas/tool_call.schema.json).
// Optional strings are pointers so that an empty value is told from an
// absent one.
type executeArgs struct {
	ToolID                 string               `json:"tool_id"`
	Args                   json.RawMessage      `json:"args"`
	DryRun                 bool                 `json:"dry_run"`
	IdempotencyKey         *string              `json:"idempotency_key"`
	ExpectedDocumentHashes []guard.ExpectedHash `json:"expected_document_hashes"`
	ToolClass              *string              `json:"tool_class"`
	ContentHashAlg         *string              `json:"content_hash_alg"`

	// The capability token and proof presented in _meta (spec 004).
	capToken, capProof string
	capPresented       bool
	// fulfilling is set when a full principal runs a restricted
	// principal's request: its capability was checked when it was made.
	fulfilling bool
}

// hydrated is tool_hydrate's answer: the upstream definition plus quiver's
// classification of the tool.
type hydrated struct {
	catalog.Hydration
	Classification classification `json:"classification"`
}

type classification struct {
	// ToolClass is the registry's class: read, write or unclassified.
	ToolClass string `json:"tool_class"`
	// DocumentOp is true for a registry document operation.
	DocumentOp bool `json:"document_op,omitempty"`
	// Destructive is true for a tool classified destructive (tool_class
	// is then write): calling it needs allow_destructive.
	Destructive bool `json:"destructive,omitempty"`
	// Permissions are those a cli tool's manifest asks of every caller
	// (its elevation rule may ask more).
	Permissions     []string `json:"permissions,omitempty"`
	RegistryVersion string   `json:"registry_version,omitempty"`
	TrustLevel      string   `json:"trust_level"`
	Risk            string   `json:"risk"`
	// RequiresCapability says a call must present a capability token, and
	// CapabilityRequest how to ask for one (spec 004).
	RequiresCapability bool            `json:"requires_capability,omitempty"`
	CapabilityRequest  *capabilityHint `json:"capability_request,omitempty"`
}

// capabilityHint tells an agent how to obtain and present a capability.
type capabilityHint struct {
	Method string   `json:"method"`
	Tool   string   `json:"tool"`
	Tools  []string `json:"tools"`
	Meta   []string `json:"meta"`
}

// upstreamInfo is what the runtime knows about an upstream beyond its conn.
type upstreamInfo struct {
	trust, risk string
}

func (r *Runtime) upstreamOf(st *state, server string) upstreamInfo {
	info := upstreamInfo{trust: "unknown", risk: "HIGH"}
	if e := st.owner[server]; e != nil {
		info.trust, info.risk = e.trust, e.risk
	}
	return info
}

func (r *Runtime) handleExecute(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolExecute, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a executeArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		if e := capabilityMeta(req.Params.Meta, &a); e != nil {
			return nil, e
		}
		return r.execute(ctx, req.Session, &a, false)
	})
}

// verdicts collects the checks of one execute. A real call stops at the
// first failure; a dry run records every check and goes on.
type verdicts struct {
	dry    bool
	checks []firewall.Check
	failed bool
}

// record notes one check; it returns the error a real call stops with.
func (v *verdicts) record(name string, skipped bool, e *Error) *Error {
	if !v.dry {
		return e
	}
	c := firewall.Check{Name: name, Status: "pass"}
	switch {
	case e != nil:
		c.Status, c.Detail = "fail", e.Code+": "+e.Message
		v.failed = true
	case skipped:
		c.Status = "skip"
	}
	v.checks = append(v.checks, c)
	return nil
}

// guards records the checks of a guard layer.
func (v *verdicts) guards(cs []guard.Check) *Error {
	for _, c := range cs {
		if e := v.record(c.Name, c.Skipped, guardError(c.Err, "args")); e != nil {
			return e
		}
	}
	return nil
}

// storedOutcome is what an idempotency record keeps of a finished call:
// its envelope, or the gateway error it ended with.
type storedOutcome struct {
	Envelope *firewall.Envelope `json:"envelope,omitempty"`
	IsError  bool               `json:"is_error,omitempty"`
	Error    *Error             `json:"error,omitempty"`
	// Structured is the upstream's structured content that a direct call
	// of a tool with an outputSchema passed beside the envelope
	// (fittingStructured), for a replay to answer the same.
	Structured json.RawMessage `json:"structured,omitempty"`
}

// execute runs the tool_execute pipeline in the order of DESIGN.md:
//
//	resolve -> tool_call schema -> tolerant repairs (when on) ->
//	argument guards (workspace, egress) -> authorization -> front door
//	(class, declaration, read-only capability, idempotency key) ->
//	argument validation -> connector (registry parity, write-side document
//	guards) -> quota -> dry run -> idempotency record -> cache -> dispatch
//	with retry -> cache store -> read-side document guards -> firewall ->
//	envelope with effect -> idempotency record completed
//
// Nothing is dispatched for a call that failed an earlier step. A direct
// call (a directly listed tool) answers with the upstream's result as it
// is, unless the firewall kept a large result out of the context.
func (r *Runtime) execute(ctx context.Context, ss *mcp.ServerSession, a *executeArgs, direct bool) (*mcp.CallToolResult, *Error) {
	st := r.state.Load() // one state for the whole call (spec 003 §4.6)
	it, e := r.resolveTool(ctx, st, a.ToolID)
	if e != nil {
		toolReceipt(ctx) // unclassified; the stage is registry
		if c := callerOf(ctx); c != nil && c.rc.MCP.ToolID == "" {
			// The id asked for, so that an audit finds the attempt
			// (receipts cap it); a concealed tool's receipt already
			// names it.
			c.rc.MCP.ToolID = a.ToolID
		}
		return nil, e
	}
	r.recordItem(ctx, st, it)
	recordClass(ctx, st, it)
	var repairs []string
	raw := a.Args
	if r.cfg.TolerantArgs {
		if fixed, ok := controls.ParseStringifiedArgs(raw); ok {
			raw = fixed
			repairs = append(repairs, controls.ArgRepair{Rule: controls.RuleParseStringifiedObject}.String())
		}
	}
	if e := r.validateCall(a); e != nil {
		return nil, e
	}
	args, e := decodeToolArgs(raw)
	if e != nil {
		return nil, e
	}
	if r.cfg.TolerantArgs {
		for _, rp := range controls.RepairArgs(args, it.CallSchema()) {
			repairs = append(repairs, rp.String())
		}
	}
	call := &guard.Call{ServerID: it.Server, ToolName: it.UpstreamName, Args: args,
		ExpectedHashes: a.ExpectedDocumentHashes, ReadOnly: r.readOnly(ctx, ss)}
	if a.IdempotencyKey != nil {
		call.IdempotencyKey = *a.IdempotencyKey
	}
	if a.ToolClass != nil {
		call.DeclaredClass = guard.Class(*a.ToolClass)
	}
	v := &verdicts{dry: a.DryRun}
	v.record("hydrate", false, nil)
	deny := func(e *Error) (*mcp.CallToolResult, *Error) {
		r.log.Info("tool_execute refused", "code", e.Code, "tool_id", it.ID, "server", it.Server, "tool", it.UpstreamName, "args_sha256", argsDigest(args))
		return nil, e.withDetail("tool_id", it.ID)
	}

	// Argument guards (spec 001 MUST 7): the upstream's workspace roots and
	// egress allowlist, on the final arguments (after tolerant repairs),
	// before authorization so that a refused call consumes no approval.
	if e := r.checkArgGuards(ctx, st, it.Server, args, v); e != nil {
		return deny(e)
	}

	// Authorization (spec 001 MUSTs 4, 5, 9): the incident state and the
	// policy decide for this principal, approvals let a require_approval
	// call through once, and client credentials in the arguments are
	// refused.
	d, ae := r.authorizeDecided(ctx, st, it, a.Args, a.DryRun)
	if e := v.record("authorization", false, ae); e != nil {
		return deny(e)
	}
	// Capability (spec 004): a token the policy requires, or one the
	// caller presented, is validated before anything is dispatched.
	capJTI := ""
	if (d.RequiresCapability || a.capPresented) && !a.fulfilling {
		var ce *Error
		capJTI, ce = r.checkCapability(ctx, it, a, d.RequiresCapability)
		if e := v.record("capability", false, ce); e != nil {
			return deny(e)
		}
	}
	if f := clientCredential(ctx, args); f != nil {
		if e := v.record("credential_boundary", false, blockClientToken(ctx, f, v.dry)); e != nil {
			return deny(e)
		}
	}

	// Permissions (spec 002 §1.6): a cli manifest's permissions, with
	// allow_destructive and its elevation rule.
	man := manifestOf(st, it)
	if man != nil || requiredPermissions(st, it, args) != nil {
		if e := v.record("permissions", false, r.checkPermissions(ctx, ss, st, it, args)); e != nil {
			return deny(e)
		}
	}

	// Front door: the class comes from the registry, never from the caller.
	dec, checks := st.gate.Check(call)
	if e := v.guards(checks); e != nil {
		return deny(e)
	}
	verr := it.ValidateArgs(args)
	var ve *Error
	if verr != nil {
		ve = classify(verr).withPath("args")
		ve.quiet = true
	}
	if e := v.record("schema_validation", false, ve); e != nil {
		return deny(e)
	}
	if e := r.checkStrictArgs(ctx, st, it, args, v); e != nil {
		return deny(e)
	}
	// A cli tool's argv template places only what it may (no option
	// injection); checked on valid arguments only.
	if man != nil {
		var ae *Error
		if verr == nil {
			ae = checkArgv(st, it, args)
		}
		if e := v.record("argv", verr != nil, ae); e != nil {
			return deny(e)
		}
	}
	// Connector: the pinned registry, and the documents the call writes.
	adm, checks := r.connector().Admit(call, dec)
	if e := v.guards(checks); e != nil {
		return deny(e)
	}
	// A restricted principal's call, checked so far, becomes a request
	// that a full principal fulfils (spec 004's privilege separation).
	if !a.DryRun && !a.fulfilling && r.restricted(ctx) {
		return deny(r.queueToolRequest(ctx, it, a, capJTI))
	}
	sess, who := r.limitKey(ctx, ss), r.limitPrincipal(ctx, ss)
	if a.DryRun {
		var rl *Error
		if d := r.limiter().Check(ctx, sess, who, ToolExecute, it.ID); d != nil {
			rl = rateLimited(d)
		}
		v.record("rate_limit", r.limiter() == nil, rl)
		r.idempotencyPreview(ctx, ss, v, it, adm, call)
		return structured(r.dryRun(it, verr, adm, v, repairs), ""), nil
	}
	if d := r.limiter().Take(ctx, sess, who, ToolExecute, it.ID); d != nil {
		return deny(rateLimited(d))
	}
	if dec.Unclassified {
		r.log.Warn("unclassified tool allowed because the environment is dev", "tool_id", it.ID, "server", it.Server, "tool", it.UpstreamName)
	}

	// Idempotency: a repeated write is answered from its record.
	var resv *guard.Reservation
	if adm.Class == guard.ClassWrite {
		var out *mcp.CallToolResult
		var e *Error
		resv, out, e = r.beginIdempotent(ctx, ss, it, call, direct)
		if e != nil {
			return deny(e)
		}
		if out != nil {
			return out, nil
		}
	}
	out, e := r.dispatch(ctx, ss, st, it, args, &adm, resv, repairs, direct)
	if e != nil {
		return nil, e.withDetail("tool_id", it.ID)
	}
	return out, nil
}

// dispatch runs the controls after the dry-run point: cache, dispatch with
// retry, cache store, read-side document guards, firewall, effect, and the
// idempotency record of a write.
func (r *Runtime) dispatch(ctx context.Context, ss *mcp.ServerSession, st *state, it *catalog.Item, args map[string]any,
	adm *guard.Admission, resv *guard.Reservation, repairs []string, direct bool) (*mcp.CallToolResult, *Error) {
	// finish settles the idempotency record of a call that ends with a
	// gateway error after dispatch was attempted.
	finish := func(e *Error, sent bool) *Error {
		if resv == nil {
			return e
		}
		var err error
		if sent {
			err = r.idem().Abandon(ctx, resv, e.Code)
		} else {
			err = r.idem().Release(ctx, resv)
		}
		if err != nil {
			r.log.Error("idempotency record not updated", "err", err)
		}
		return e
	}
	complete := func(o storedOutcome) {
		if resv == nil {
			return
		}
		payload, err := json.Marshal(o)
		if err == nil && len(payload) > guard.MaxIdempotencyPayload && o.Envelope != nil {
			slim := *o.Envelope
			slim.Result = nil
			slim.Summary += " (the full result was too large to keep for replays)"
			o.Envelope = &slim
			payload, err = json.Marshal(o)
		}
		if err == nil {
			err = r.idem().Complete(ctx, resv, payload)
		}
		if err != nil {
			r.log.Error("idempotency record not completed", "err", err)
		}
	}

	cacheKey := ""
	if r.cacheable(it, adm) {
		if k, err := controls.Key(st.gen, it.ID, args); err == nil {
			cacheKey = k
		}
	}
	start := time.Now()
	var res *mcp.CallToolResult
	attempts, hit := 0, false
	if cacheKey != "" {
		res, hit = r.cache.Get(cacheKey)
	}
	if !hit {
		if e := r.connector().Verify(adm); e != nil {
			return nil, finish(guardError(e, "args"), false)
		}
		c, ok := st.owner[it.Server]
		if !ok {
			return nil, finish(newError(CodeUpstreamUnavailable, "the upstream of %q is not connected", it.ID), false)
		}
		// The tasks extension is offered only where nothing of the call
		// waits for its result (tasks.go).
		if cl := callerOf(ctx); cl != nil {
			cl.offerTask = r.offerTasks(ctx, c.conn, resv != nil || cacheKey != "" || adm.ReadsDocuments())
		}
		var err error
		res, attempts, err = controls.Do(ctx, r.retry, func(ctx context.Context) (*mcp.CallToolResult, error) {
			cctx, cancel := context.WithTimeout(ctx, r.cfg.Timing.CallTimeout)
			defer cancel()
			res, err := c.callTool(cctx, it, args)
			if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
				return nil, newError(CodeUpstreamTimeout, "the upstream did not answer within %s", r.cfg.Timing.CallTimeout).withCause(err)
			}
			return res, err
		}, func(err error) controls.Failure {
			f := controls.Failure{Code: classify(err).Code, Safe: adm.Class != guard.ClassWrite || neverSent(err)}
			var ue *upstream.Error
			if errors.As(err, &ue) {
				f.RetryAfter = ue.RetryAfter
			}
			return f
		})
		if err != nil {
			e := classify(err)
			if attempts > 1 {
				e.withDetail("attempts", attempts)
			}
			return nil, finish(e, !noEffect(err))
		}
		if cl := callerOf(ctx); cl != nil && cl.task != nil {
			return r.startTask(ctx, it, direct)
		}
		if res.NeedsInput() {
			// The call is not over: the client answers the input
			// requests and retries. Nothing of it is stored, shaped or
			// recorded as an outcome; the idempotency key is free for
			// the retry.
			if resv != nil {
				if err := r.idem().Release(ctx, resv); err != nil {
					r.log.Error("idempotency record not released", "err", err)
				}
			}
			return inputRequired(res), nil
		}
		if cacheKey != "" && !res.IsError {
			r.cache.Put(cacheKey, res)
		}
	}
	took := time.Since(start)

	var readDocs []guard.DocumentHash
	var readBytes int64
	if !res.IsError && adm.ReadsDocuments() {
		doc, err := resultDocument(res)
		if err != nil {
			e := newError(CodeInternal, "the upstream result could not be inspected").withCause(err)
			complete(storedOutcome{Error: e})
			return nil, e
		}
		var ge *guard.Error
		if readDocs, readBytes, ge = r.connector().CheckResult(adm, doc); ge != nil {
			e := guardError(ge, "result")
			complete(storedOutcome{Error: e})
			r.log.Info("tool_execute result withheld", "code", e.Code, "tool_id", it.ID)
			return nil, e
		}
	}
	sr, e := r.settle(ctx, ss, st, it, res, took, direct)
	if e != nil {
		complete(storedOutcome{Error: e})
		return nil, e
	}
	res, env := sr.res, sr.env
	env.Provenance.Attempts = attempts
	env.Provenance.CacheHit = hit
	env.Provenance.ArgRepairs = repairs
	env.Effect = newEffect(adm, readDocs, readBytes)
	recordEffect(ctx, env.Effect)
	if adm.Class == guard.ClassWrite {
		// The audit line of a write (spec 000 §9.2.2 rule 5): class and
		// document hashes, never the content.
		hashes := make([]string, 0, len(env.Effect.DocumentHashes))
		for _, d := range env.Effect.DocumentHashes {
			hashes = append(hashes, d.Pointer+"="+d.Hash)
		}
		r.log.Info("tool_execute write", "effect_id", env.Effect.EffectID, "tool_id", it.ID, "tool_class", env.Effect.ToolClass,
			"batch_total_bytes", env.Effect.BatchTotalBytes, "document_hashes", hashes, "registry", env.Effect.RegistryVersion, "is_error", res.IsError)
	}
	sr.env = env
	sc := r.structuredOf(it, sr, direct)
	complete(storedOutcome{Envelope: &env, IsError: res.IsError, Structured: sc})
	return sr.answer(it, sc, direct), nil
}

// settled is an upstream result after the result path.
type settled struct {
	// res is the result after output validation and the output policy.
	res *mcp.CallToolResult
	// env is its envelope: inline, or what the firewall kept of it.
	env firewall.Envelope
	// verbatim is set when a direct call's result goes out as it is.
	verbatim bool
}

// settle runs a complete upstream result of it through the result path
// every result takes, a task's final one too: output validation and the
// output policy, before the firewall and anything stored (idempotency
// records, artifacts) sees the result; then the firewall, unless the
// result goes out verbatim or the firewall is off for it.
func (r *Runtime) settle(ctx context.Context, ss *mcp.ServerSession, st *state, it *catalog.Item, res *mcp.CallToolResult, took time.Duration, direct bool) (settled, *Error) {
	res, gov, ge := r.governOutput(st, it, res)
	if ge != nil {
		return settled{}, ge
	}
	recordGoverned(ctx, gov)
	fres := toFirewall(res.Content, res.StructuredContent, res.IsError)
	out := settled{res: res, verbatim: direct && r.verbatim(it, res)}
	if out.verbatim || r.firewallOffFor(it) {
		out.env = bareEnvelope(it, fres, took)
		return out, nil
	}
	var e *Error
	if out.env, e = r.shape(ctx, ss, it, fres, took); e != nil {
		return settled{}, e
	}
	return out, nil
}

// structuredOf is the structuredContent a direct result kept out of the
// context carries (nil when none fits).
func (r *Runtime) structuredOf(it *catalog.Item, s settled, direct bool) json.RawMessage {
	if direct && !s.verbatim {
		return r.fittingStructured(it, s.res)
	}
	return nil
}

// answer is the tool result the client gets.
func (s settled) answer(it *catalog.Item, sc json.RawMessage, direct bool) *mcp.CallToolResult {
	switch {
	case s.verbatim:
		return verbatimResult(s.res)
	case direct:
		return directResult(s.env, s.res.IsError, it, sc)
	}
	// An upstream tool's own error is a tool error, not a gateway error:
	// the envelope carries it with status "error".
	return envelopeResult(s.env, s.res.IsError)
}

// inputRequired is the input_required answer of a call for a sessionless
// caller: the input requests and quiver's sealed state, nothing else (the
// go-sdk refuses a result that has both content and input requests).
func inputRequired(res *mcp.CallToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: res.InputRequests, RequestState: res.RequestState}
}

// beginIdempotent reserves the call's idempotency key, or answers a repeat
// from its record.
func (r *Runtime) beginIdempotent(ctx context.Context, ss *mcp.ServerSession, it *catalog.Item, call *guard.Call, direct bool) (*guard.Reservation, *mcp.CallToolResult, *Error) {
	if r.idem() == nil {
		return nil, nil, newError(CodeInternal, "idempotency records are not available")
	}
	fp, err := guard.Fingerprint(it.Server, it.UpstreamName, call.Args)
	if err != nil {
		return nil, nil, newError(CodeInternal, "internal gateway error").withCause(err)
	}
	resv, refusal, err := r.idem().Begin(ctx, r.ownerOf(ctx, ss), call.IdempotencyKey, fp)
	switch {
	case isStateUnavailable(err):
		// A write never runs without its idempotency record.
		return nil, nil, stateUnavailable(err)
	case err != nil:
		return nil, nil, newError(CodeInternal, "idempotency records are not available").withCause(err)
	case refusal != nil:
		return nil, nil, guardError(refusal, "args")
	case resv.Replay == nil:
		return resv, nil, nil
	}
	var o storedOutcome
	if err := json.Unmarshal(resv.Replay, &o); err != nil {
		return nil, nil, newError(CodeInternal, "the idempotency record is unreadable").withCause(err)
	}
	r.log.Info("tool_execute answered from its idempotency record", "tool_id", it.ID)
	if o.Error != nil {
		return nil, nil, o.Error
	}
	if o.Envelope == nil {
		return nil, nil, newError(CodeInternal, "the idempotency record is unreadable")
	}
	o.Envelope.Provenance.IdempotentReplay = true
	if direct {
		return nil, directResult(*o.Envelope, o.IsError, it, o.Structured), nil
	}
	return nil, envelopeResult(*o.Envelope, o.IsError), nil
}

// idempotencyPreview adds, to a dry run of a write, what its key's record
// would do.
func (r *Runtime) idempotencyPreview(ctx context.Context, ss *mcp.ServerSession, v *verdicts, it *catalog.Item, adm guard.Admission, call *guard.Call) {
	if adm.Class != guard.ClassWrite || call.IdempotencyKey == "" || r.idem() == nil {
		v.record("idempotency_record", true, nil)
		return
	}
	fp, err := guard.Fingerprint(it.Server, it.UpstreamName, call.Args)
	if err != nil {
		v.record("idempotency_record", false, newError(CodeInternal, "internal gateway error"))
		return
	}
	replay, refusal, err := r.idem().Peek(ctx, r.ownerOf(ctx, ss), call.IdempotencyKey, fp)
	switch {
	case isStateUnavailable(err):
		v.record("idempotency_record", false, stateUnavailable(err))
	case err != nil:
		v.record("idempotency_record", false, newError(CodeInternal, "idempotency records are not available"))
	case refusal != nil:
		v.record("idempotency_record", false, guardError(refusal, "args"))
	default:
		v.record("idempotency_record", false, nil)
		if replay {
			v.checks[len(v.checks)-1].Detail = "a call with this key finished; it would be answered from its record"
		}
	}
}

// cacheable reports whether the call's result may be cached: the cache is
// on, the tool_id passes its allow list, and the tool is read-only. With a
// registry loaded the registry decides (only read tools); without one the
// upstream's readOnlyHint does (an unverified hint the operator opted into).
func (r *Runtime) cacheable(it *catalog.Item, adm *guard.Admission) bool {
	if r.cache == nil || !r.cache.Allowed(it.ID) {
		return false
	}
	if r.connector().Pinned().Manifests() > 0 {
		return adm.Class == guard.ClassRead
	}
	if adm.Class == guard.ClassWrite || it.Tool == nil {
		return false
	}
	ro, _ := it.Tool.Annotations["readOnlyHint"].(bool)
	return ro
}

// neverSent reports whether a failed call certainly never reached the
// upstream, so that even a write may be retried.
func neverSent(err error) bool {
	return errors.Is(err, upstream.ErrNotConnected) || errors.Is(err, upstream.ErrClosed) || errors.Is(err, errNotSent)
}

// noEffect reports whether a failed call certainly had no effect: it never
// left quiver, or the upstream refused it (an error answer, or an HTTP
// 401/403/429). Timeouts, broken connections and cancellations may have
// had one.
func noEffect(err error) bool {
	if neverSent(err) {
		return true
	}
	var ue *upstream.Error
	if !errors.As(err, &ue) {
		return false
	}
	switch ue.Code {
	case CodeUpstreamError, CodeAuthFailed, CodePermissionDenied, CodeRateLimited:
		return true
	}
	return false
}

// resultDocument is the upstream result as the JSON value read-side content
// pointers address: {"content": [...], "structuredContent": ...}.
func resultDocument(res *mcp.CallToolResult) (any, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// newEffect builds the envelope's tool_effect: a fresh UUIDv7, the written
// and read documents, and their total.
func newEffect(adm *guard.Admission, read []guard.DocumentHash, readBytes int64) *firewall.Effect {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's randomness does.
		id = uuid.Nil
	}
	ef := &firewall.Effect{EffectID: id.String(), DocumentHashes: []firewall.DocumentHash{},
		BatchTotalBytes: adm.BatchBytes + readBytes, ContentHashAlg: guard.HashAlg,
		ToolClass: string(adm.Class), RegistryVersion: adm.RegistryVersion}
	for _, d := range append(append([]guard.DocumentHash(nil), adm.Documents...), read...) {
		ef.DocumentHashes = append(ef.DocumentHashes, firewall.DocumentHash(d))
	}
	return ef
}

// decodeToolArgs turns the raw args of tool_execute into the decoded JSON
// value the validator and the upstream take. Absent args are {}.
func decodeToolArgs(raw json.RawMessage) (map[string]any, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, newError(CodeArgsInvalid, "args must be a JSON object").withPath("args")
	}
	if args == nil {
		args = map[string]any{}
	}
	if g := argguard.Preflight(args); g != nil {
		return nil, refusalError(g)
	}
	return args, nil
}

// dryRun is the report of a dry run (spec 003 §4.5): every check, in
// pipeline order, with nothing dispatched and no quota consumed.
func (r *Runtime) dryRun(it *catalog.Item, verr error, adm guard.Admission, v *verdicts, repairs []string) firewall.DryRun {
	report := firewall.DryRun{DryRun: true, ToolID: it.ID, UpstreamName: it.UpstreamName, ArgsValid: verr == nil,
		Checks: v.checks, ToolClass: string(adm.Class), Allowed: !v.failed, ArgRepairs: repairs}
	if report.ToolClass == "" {
		report.ToolClass = string(guard.ClassUnclassified)
	}
	if it.Tool != nil && it.Tool.Annotations != nil {
		report.Annotations = map[string]any{}
		for k, v := range it.Tool.Annotations {
			report.Annotations[k] = v
		}
		report.Annotations["verified"] = false
	}
	return report
}

type viewArgs struct {
	Handle   string          `json:"handle"`
	Selector json.RawMessage `json:"selector"`
}

func (r *Runtime) handleView(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolView, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a viewArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		if e := r.takeMeta(ctx, req.Session, ToolView); e != nil {
			return nil, e
		}
		sel, err := firewall.ParseSelector(a.Selector)
		if err != nil {
			return nil, newError(CodeViewFailed, "%s", err.Error()).withPath("selector").withCause(err)
		}
		if r.fw == nil {
			return nil, newError(CodeViewFailed, "no artifact with handle %q: this gateway keeps no artifacts", a.Handle).withPath("handle")
		}
		owner := r.ownerOf(ctx, req.Session)
		v, err := r.fw.View(ctx, owner, a.Handle, sel)
		if err != nil {
			if ctx.Err() != nil {
				return nil, newError(CodeViewFailed, "the view was cancelled").withCause(err)
			}
			// A foreign handle and a missing one read the same: the
			// message lists the causes without saying which it is.
			if errors.Is(err, artifacts.ErrNotFound) {
				return nil, newError(CodeViewFailed, "no artifact with handle %q for this caller (%s)", a.Handle, notFoundWhy(owner)).withPath("handle").withCause(err)
			}
			return nil, newError(CodeViewFailed, "%s", err.Error()).withPath("selector").withCause(err)
		}
		text := v.Text + "\n(" + v.What
		if len(v.Next) > 0 && string(v.Next) != "null" {
			text += "; next selector: " + string(v.Next)
		}
		text += ")"
		return structured(v, text), nil
	})
}

// notFoundWhy lists why a handle can be unknown to its caller. An
// anonymous HTTP caller is told that a new session is a new principal,
// which is the usual surprise after a reconnect.
func notFoundWhy(owner string) string {
	const why = "unknown, expired, evicted, or another principal's"
	if strings.HasPrefix(owner, "session:") || strings.HasPrefix(owner, "anonymous:") {
		return why + "; unauthenticated, each session is its own principal: a reconnect is a new one"
	}
	return why
}
