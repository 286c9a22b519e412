package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/controls"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/schemas"
	"github.com/quiver-mcp/quiver/toolid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// toolCallSchemaURL is the $id of schemas/tool_call.schema.json.
const toolCallSchemaURL = "https://quiver-mcp.dev/schemas/tool_call.schema.json"

// initExecute prepares what New owns on the execute path: the compiled
// tool_call schema (also tool_execute's inputSchema) and the controls that
// live as long as the runtime.
func (r *Runtime) initExecute() error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.ToolCall))
	if err != nil {
		return fmt.Errorf("runtime: tool_call schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(toolCallSchemaURL, doc); err != nil {
		return fmt.Errorf("runtime: tool_call schema: %w", err)
	}
	if r.callSchema, err = c.Compile(toolCallSchemaURL); err != nil {
		return fmt.Errorf("runtime: tool_call schema: %w", err)
	}
	// The inputSchema is the same document without its header.
	var m map[string]any
	if err := json.Unmarshal(schemas.ToolCall, &m); err != nil {
		return fmt.Errorf("runtime: tool_call schema: %w", err)
	}
	for _, k := range []string{"$schema", "$id", "title", "description"} {
		delete(m, k)
	}
	if r.executeSchema, err = json.Marshal(m); err != nil {
		return fmt.Errorf("runtime: tool_call schema: %w", err)
	}
	if o := cacheOptions(r.cfg); o != nil {
		r.cache = controls.NewCache[*mcp.CallToolResult](*o)
	}
	r.limits.Store(controls.NewRateLimiter(rateLimits(r.cfg), r.kv, nil))
	return nil
}

// limiter returns the rate limiter in force (nil: no limits).
func (r *Runtime) limiter() *controls.RateLimiter { return r.limits.Load() }

// pinned is the registry pinned in the connector layer, with the
// idempotency records its write tools need (nil without write tools) and
// the manifest globs it was loaded from. Apply replaces it whole.
type pinned struct {
	connector *guard.Connector
	idem      *guard.IdempotencyStore
	globs     []string
}

// connector returns the connector layer in force.
func (r *Runtime) connector() *guard.Connector { return r.pins.Load().connector }

// idem returns the idempotency records in force (nil: none open).
func (r *Runtime) idem() *guard.IdempotencyStore { return r.pins.Load().idem }

// cacheOptions are the response cache's options; nil when it is off.
func cacheOptions(cfg *config.Config) *controls.CacheOptions {
	if !cfg.Cache.ReadOnly {
		return nil
	}
	return &controls.CacheOptions{TTL: time.Duration(cfg.Cache.TTL), MaxEntries: cfg.Cache.MaxEntries, Allow: cfg.Cache.Allow}
}

// rateLimits are the rate limiter's limits by scope; nil when none is set.
func rateLimits(cfg *config.Config) map[string]controls.Limit {
	if len(cfg.RateLimits) == 0 {
		return nil
	}
	limits := make(map[string]controls.Limit, len(cfg.RateLimits))
	for scope, l := range cfg.RateLimits {
		limits[scope] = controls.Limit{PerMinute: l.MaxCallsPerMinute, PerSession: l.MaxCallsPerSession}
	}
	return limits
}

// loadRegistry loads the registry: Deps.Registry, else the configured
// globs, else an empty registry; the manifests of the cli upstreams among
// entries join it.
func (r *Runtime) loadRegistry(globs []string, entries []*upstreamEntry) (*guard.Registry, error) {
	load := r.deps.Registry
	if load == nil && len(globs) > 0 {
		load = func() (*guard.Registry, error) { return guard.LoadRegistry(globs) }
	}
	var cli []*guard.Manifest
	for _, e := range entries {
		if e.manifest != nil {
			cli = append(cli, e.manifest)
		}
	}
	if load == nil {
		return guard.NewRegistry(cli...)
	}
	reg, err := load()
	if err != nil {
		return nil, err
	}
	return reg.Extend(cli...)
}

// pinRegistry loads the registry from globs and the cli upstreams among
// entries, pins it in a connector layer, and opens the idempotency store
// when the registry classifies any tool write; cfg gives the timings of
// the writes. The caller puts the result in force.
func (r *Runtime) pinRegistry(globs []string, entries []*upstreamEntry, cfg *config.Config) (*pinned, error) {
	reg, err := r.loadRegistry(globs, entries)
	if err != nil {
		return nil, fmt.Errorf("tool registry: %w", err)
	}
	pn := &pinned{connector: guard.NewConnector(reg, r.cfg.Environment), globs: globs}
	r.log.Info("tool registry pinned", "version", reg.Version(), "manifests", reg.Manifests(), "tools", reg.Tools(), "environment", string(r.cfg.Environment))
	if r.cfg.Environment == guard.EnvProd && reg.Tools() == 0 {
		r.log.Warn("environment prod without registry manifests: every tool_execute is denied (TOOL_UNCLASSIFIED_DENIED); add registry manifests or set environment: dev")
	}
	if !reg.HasWrites() && len(globs) == 0 {
		// With manifests on disk the idempotency records open anyway:
		// the registry watch may pin a write tool later.
		return pn, nil
	}
	if pn.idem, err = guard.NewIdempotency(guard.IdempotencyOptions{KV: r.kv, PendingTimeout: pendingTimeout(cfg)}); err != nil {
		return nil, err
	}
	return pn, nil
}

// pendingTimeout bounds how long a write may run: every attempt of the
// slowest upstream with the longest backoff, plus a margin. An idempotency
// reservation pending longer was left by a process that died mid-call.
func pendingTimeout(cfg *config.Config) time.Duration {
	slowest := cfg.Timing.CallTimeout
	for _, u := range cfg.Upstreams {
		slowest = max(slowest, time.Duration(u.CallTimeout))
	}
	attempts := time.Duration(max(cfg.Retry.MaxAttempts, 1))
	return attempts*(slowest+time.Duration(cfg.Retry.MaxDelay)) + time.Minute
}

// frontDoor loads the registry for a new catalog: the gate that judges
// calls against it, and the registry the cards are classified by (the
// pinned one when loading failed). A registry that differs from the pinned
// one is served (so that the front door and the connector disagree, and
// every call is refused) and logged.
func (r *Runtime) frontDoor() (*guard.Gate, *guard.Registry) {
	pinned := (*guard.Registry)(nil)
	var globs []string
	if pn := r.pins.Load(); pn != nil {
		pinned, globs = pn.connector.Pinned(), pn.globs
	}
	reg, err := r.loadRegistry(globs, r.upstreams())
	if err != nil {
		r.log.Error("loading the tool registry failed; every tool_execute is refused (REGISTRY_VERSION_MISMATCH) until it loads again", "err", err)
		return guard.UnavailableGate(r.cfg.Environment), pinned
	}
	if pinned != nil && reg.Version() != pinned.Version() {
		r.log.Error("the tool registry differs from the pinned one; every tool_execute is refused (REGISTRY_VERSION_MISMATCH) until the registry watch or a reload pins it",
			"pinned", pinned.Version(), "current", reg.Version())
	}
	return guard.NewGate(reg, r.cfg.Environment), reg
}

// logClassification reports how much of the catalog the registry covers.
func (r *Runtime) logClassification(snap *catalog.Snapshot, reg *guard.Registry) {
	var read, write, none int
	for _, it := range snap.Items(toolid.KindTool) {
		switch reg.ClassOf(it.Server, it.UpstreamName) {
		case guard.ClassRead:
			read++
		case guard.ClassWrite:
			write++
		default:
			none++
		}
	}
	verdict := "allowed with a warning"
	if r.cfg.Environment == guard.EnvProd {
		verdict = "denied"
	}
	r.log.Info("tool classification", "read", read, "write", write, "unclassified", none, "unclassified_are", verdict, "registry", reg.Version())
}

// principalName is the configured name of the caller's principal: the
// subject of a verified token, the local principal over stdio, "" (not
// named) for an anonymous HTTP session.
func (r *Runtime) principalName(ctx context.Context, ss *mcp.ServerSession) string {
	if c := callerOf(ctx); c != nil && c.jwt {
		return c.p.Sub
	}
	if ss != nil && ss.ID() != "" {
		return ""
	}
	return r.localName
}

// readOnly reports the caller's read_only constraint.
func (r *Runtime) readOnly(ctx context.Context, ss *mcp.ServerSession) bool {
	if name := r.principalName(ctx, ss); name != "" {
		if p, ok := r.cfg.Principals[name]; ok {
			return p.ReadOnly
		}
	}
	return r.cfg.Principals["*"].ReadOnly
}

// limitKey keys the per-session rate limits (max_calls_per_session): the
// principal of a verified token (its limits follow it across sessions),
// else the session.
func (r *Runtime) limitKey(ctx context.Context, ss *mcp.ServerSession) any {
	c := callerOf(ctx)
	switch {
	case c != nil && c.jwt:
		return "principal:" + c.p.Key()
	case c != nil && c.sessionless && !c.local:
		// Anonymous requests without a session share one budget: a new
		// request is not a new budget.
		return "anonymous"
	case ss == nil:
		return nil
	}
	return ss
}

// limitPrincipal keys the shared per-minute windows: the principal of a
// verified token, the local principal over stdio, the session over HTTP
// without auth (each session is its own principal), and one key for the
// anonymous requests without a session.
func (r *Runtime) limitPrincipal(ctx context.Context, ss *mcp.ServerSession) string {
	c := callerOf(ctx)
	switch {
	case c != nil && c.jwt:
		return "principal:" + c.p.Key()
	case c != nil && c.local:
		return "local:" + r.localName
	case ss != nil && ss.ID() != "":
		return "session:" + ss.ID()
	case c != nil && c.sessionless:
		return "anonymous"
	}
	return "local:" + r.localName
}

// rateLimited turns a limiter's denial into RATE_LIMITED: retryable with
// retry_after (seconds) for the per-minute window, not retryable for a
// session cap; a limiter that could not reach its windows refuses with
// STATE_UNAVAILABLE.
func rateLimited(d *controls.Denial) *Error {
	if d.Err != nil {
		return stateUnavailable(d.Err)
	}
	e := newError(CodeRateLimited, "%s of scope %s reached", d.Limit, d.Scope).
		withDetail("scope", d.Scope).withDetail("limit", d.Limit)
	if d.RetryAfter > 0 {
		e.withDetail("retry_after", d.RetryAfter.Seconds())
	} else {
		e.Retryable = false
	}
	return e
}

// takeMeta counts one call of a meta-tool against its rate limits.
func (r *Runtime) takeMeta(ctx context.Context, ss *mcp.ServerSession, tool string) *Error {
	if d := r.limiter().Take(ctx, r.limitKey(ctx, ss), r.limitPrincipal(ctx, ss), tool, ""); d != nil {
		return rateLimited(d)
	}
	return nil
}

// guardError converts a guard refusal into a wire error. where prefixes
// JSON pointers: "args" for the call's arguments, "result" for the
// upstream's result.
func guardError(ge *guard.Error, where string) *Error {
	if ge == nil {
		return nil
	}
	e := &Error{Code: ge.Code, Message: sanitize(ge.Message), Retryable: ge.Retryable, quiet: true}
	for k, v := range ge.Details {
		e.withDetail(k, v)
	}
	switch {
	case strings.HasPrefix(ge.Pointer, "/") || (ge.Pointer == "" && strings.HasPrefix(ge.Code, "DOC_")):
		e.Path = sanitize(where + ge.Pointer)
		e.withDetail("pointer", ge.Pointer)
	default:
		e.Path = sanitize(ge.Pointer)
	}
	return e
}

// validateCall checks tool_execute's arguments against
// schemas/tool_call.schema.json (spec 000 §9.2.2 rule 1). The decoder has
// already enforced the fields and their JSON types; the schema adds the
// patterns, lengths and enums. args is checked by decodeToolArgs.
func (r *Runtime) validateCall(a *executeArgs) *Error {
	doc := map[string]any{"tool_id": a.ToolID, "dry_run": a.DryRun}
	if a.IdempotencyKey != nil {
		doc["idempotency_key"] = *a.IdempotencyKey
	}
	if a.ToolClass != nil {
		doc["tool_class"] = *a.ToolClass
	}
	if a.ContentHashAlg != nil {
		doc["content_hash_alg"] = *a.ContentHashAlg
	}
	if a.ExpectedDocumentHashes != nil {
		list := make([]any, len(a.ExpectedDocumentHashes))
		for i, h := range a.ExpectedDocumentHashes {
			list[i] = map[string]any{"pointer": h.Pointer, "hash": h.Hash}
		}
		doc["expected_document_hashes"] = list
	}
	err := r.callSchema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return newError(CodeArgsInvalid, "invalid tool_execute arguments")
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := append([]string(nil), ve.InstanceLocation...)
	field := strings.Join(loc, "/")
	msg := ve.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	// The message may quote the offending value: it is the caller's own,
	// but it stays out of the log.
	e := newError(CodeArgsInvalid, "%s: %s", field, msg).withPath(field)
	e.quiet = true
	return e
}

// argsDigest is the sha256 of the canonical arguments: what the log shows
// of them.
func argsDigest(args any) string {
	b, err := json.Marshal(args)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
