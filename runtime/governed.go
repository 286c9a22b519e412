package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/firewall"
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/outpolicy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/sandbox"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/quiver-mcp/quiver/runtime/upstream/cli"
	"github.com/quiver-mcp/quiver/toolid"
)

// This file governs tools beyond what their upstream says of them (spec
// 002): cli upstreams built from manifests, the permissions a manifest
// requires, output validation against a tool's outputSchema, and output
// policies.

// cliConn serves a cli upstream: its manifests are its listing, and a
// call runs the tool's command.
type cliConn struct {
	u *cli.Upstream
}

func (c *cliConn) name() string { return c.u.Name() }

func (c *cliConn) listing(context.Context) (catalog.Source, error) {
	var src catalog.Source
	for _, m := range c.u.Tools() {
		ann := map[string]any{"readOnlyHint": m.Class == cli.ClassRead, "destructiveHint": m.Class == cli.ClassDestructive,
			"openWorldHint": false}
		src.Tools = append(src.Tools, catalog.ToolDef{Server: c.u.Name(), Name: m.Name, Title: m.Title, Description: m.Description,
			InputSchema: m.Input, OutputSchema: m.OutputSchema, Annotations: ann})
	}
	return src, nil
}

func (c *cliConn) callTool(ctx context.Context, it *catalog.Item, args map[string]any) (*mcp.CallToolResult, error) {
	res, err := c.u.Call(ctx, it.UpstreamName, args)
	var ce *cli.CallError
	if errors.As(err, &ce) {
		e := newError(ce.Code, "%s", ce.Msg).withCause(ce.Err)
		if ce.Code == codes.CliArgRefused {
			e.quiet = true
			return nil, e.withPath("args")
		}
		return nil, e
	}
	return res, err
}

func (c *cliConn) readResource(context.Context, *catalog.Item) (*mcp.ReadResourceResult, error) {
	return nil, &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("a cli upstream has no resources")}
}

func (c *cliConn) getPrompt(context.Context, *catalog.Item, map[string]string) (*mcp.GetPromptResult, error) {
	return nil, &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("a cli upstream has no prompts")}
}

func (c *cliConn) templates(context.Context) ([]*mcp.ResourceTemplate, error) { return nil, nil }

func (c *cliConn) complete(context.Context, *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
}

func (c *cliConn) subscribe(context.Context, string, bool) error {
	return &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("a cli upstream has no resources")}
}

// addCLIUpstream builds the entry of cli upstream u: its manifests (every
// command in allowed_commands), its sandbox (required in prod, checked
// for every tool's working directory), and the registry manifest that
// classifies its tools.
func (r *Runtime) newCLIUpstream(u *config.Upstream) (*upstreamEntry, error) {
	ms, err := cli.Load(u.CLI.Manifests, r.cfg.Dir, u.CLI.AllowedCommands)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
	}
	pol := u.SandboxPolicy()
	switch {
	case pol == nil && r.cfg.Environment == guard.EnvProd:
		return nil, fmt.Errorf("upstream %q: environment prod refuses a cli upstream without a sandbox; add sandbox: {fs: {read: [...]}, net: none} or sandbox: {off: \"<reason>\"}", u.Name)
	case pol == nil:
		r.log.Warn("cli upstream runs its commands without a sandbox (environment dev); add a sandbox block", "upstream", u.Name)
	case pol.Off != "":
		r.log.Warn("cli upstream runs its commands with the sandbox off", "upstream", u.Name, "reason", pol.Off)
	}
	l := sandbox.New(sandbox.Options{Logger: r.log})
	classes := map[string]guard.Class{}
	for _, m := range ms {
		if err := l.Check(context.Background(), sandbox.Spec{Name: u.Name, Dir: m.Cwd, Policy: pol}); err != nil {
			return nil, fmt.Errorf("tool %q (%s): %w", m.Name, m.Source, err)
		}
		// destructive is write for spec 000's guards (an idempotency key,
		// the read_only capability); the permission engine adds
		// allow_destructive, for registry files' destructive tools too.
		classes[m.Name] = guard.Class(m.Class)
	}
	man, err := guard.ClassifyTools("cli upstream "+u.Name, u.Name, classes)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
	}
	o := cli.Options{Launcher: l, Policy: pol}
	if u.Sandbox != nil {
		for _, name := range u.Sandbox.Env {
			if v, ok := r.deps.Getenv(name); ok {
				o.Env = append(o.Env, name+"="+v)
			}
		}
	}
	if r.cfg.StateDir != "" && (pol == nil || pol.Off != "") {
		o.Home = filepath.Join(r.cfg.StateDir, "home", toolid.Namespace(u.Name))
	}
	c := &cliConn{u: cli.New(u.Name, ms, o)}
	e := r.newEntry(u, c, false)
	e.manifest = man
	a := sandbox.Describe(pol)
	e.sandbox.FSPolicy, e.sandbox.NetPolicy, e.sandbox.Mode, e.sandbox.Detail = a.FS, a.Net, a.Mode, a.Detail
	r.log.Info("cli upstream loaded", "upstream", u.Name, "tools", len(ms), "sandbox", a.Mode)
	return e, nil
}

// compilePolicies compiles an upstream's output_policies.
func compilePolicies(u *config.Upstream) ([]toolPolicy, error) {
	globs := make([]string, 0, len(u.OutputPolicies))
	for g := range u.OutputPolicies {
		globs = append(globs, g)
	}
	// A literal name before globs, then the longer glob first: the more
	// specific entry decides.
	sort.Slice(globs, func(i, j int) bool {
		li, lj := !strings.ContainsAny(globs[i], `*?[\`), !strings.ContainsAny(globs[j], `*?[\`)
		if li != lj {
			return li
		}
		if len(globs[i]) != len(globs[j]) {
			return len(globs[i]) > len(globs[j])
		}
		return globs[i] < globs[j]
	})
	out := make([]toolPolicy, 0, len(globs))
	for _, g := range globs {
		rules := make(map[string]outpolicy.Action, len(u.OutputPolicies[g]))
		for k, v := range u.OutputPolicies[g] {
			rules[k] = outpolicy.Action(v)
		}
		p, err := outpolicy.Compile(rules)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: output_policies[%q]: %w", u.Name, g, err)
		}
		out = append(out, toolPolicy{glob: g, p: p})
	}
	return out, nil
}

// toolPolicy is one output_policies entry.
type toolPolicy struct {
	glob string
	p    *outpolicy.Policy
}

// policyFor returns the output policy of the entry's tool name (nil for
// none): a cli manifest's own, else the first output_policies entry whose
// glob matches.
func (e *upstreamEntry) policyFor(tool string) *outpolicy.Policy {
	if c, ok := e.conn.(*cliConn); ok {
		if m, ok := c.u.Tool(tool); ok && m.Policy != nil {
			return m.Policy
		}
	}
	for _, tp := range e.policies {
		if ok, _ := path.Match(tp.glob, tool); ok {
			return tp.p
		}
	}
	return nil
}

// manifestOf returns the cli manifest of item it (nil for a tool of any
// other upstream).
func manifestOf(st *state, it *catalog.Item) *cli.Manifest {
	e := st.owner[it.Server]
	if e == nil {
		return nil
	}
	c, ok := e.conn.(*cliConn)
	if !ok {
		return nil
	}
	m, _ := c.u.Tool(it.UpstreamName)
	return m
}

// requiredPermissions are the permissions a call of it with args needs: a
// cli manifest's (with allow_destructive and its elevation rule), or
// allow_destructive for a tool a registry file classifies destructive;
// nil when the tool asks for none.
func requiredPermissions(st *state, it *catalog.Item, args map[string]any) []string {
	if m := manifestOf(st, it); m != nil {
		return m.Required(args)
	}
	if p, ok := st.gate.Registry().Lookup(it.Server, it.UpstreamName); ok && p.Destructive {
		return []string{cli.PermDestructive}
	}
	return nil
}

// checkPermissions refuses a call whose caller lacks a permission the
// tool requires for these arguments (spec 002 §1.6).
func (r *Runtime) checkPermissions(ctx context.Context, ss *mcp.ServerSession, st *state, it *catalog.Item, args map[string]any) *Error {
	need := requiredPermissions(st, it, args)
	if len(need) == 0 {
		return nil
	}
	m := manifestOf(st, it)
	have := r.permissionsOf(ctx, ss)
	var missing []string
	for _, p := range need {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e := newError(codes.PermissionMissing, "the caller lacks the permission(s) %s that this call needs", strings.Join(missing, ", ")).
		withDetail("missing", missing)
	if m != nil && m.Elevates(args) {
		e.withDetail("elevated", true)
	}
	e.quiet = true
	return e
}

// permissionsOf is the caller's permission set: its token's (a
// "permissions" array claim, or a space-separated "scope"), and those the
// configuration grants its principal (principals.<name>.permissions, else
// principals["*"]).
func (r *Runtime) permissionsOf(ctx context.Context, ss *mcp.ServerSession) map[string]bool {
	have := map[string]bool{}
	if c := callerOf(ctx); c != nil && (c.jwt || c.local) {
		switch v := c.p.Claims["permissions"].(type) {
		case []any:
			for _, p := range v {
				if s, ok := p.(string); ok {
					have[s] = true
				}
			}
		case []string:
			for _, s := range v {
				have[s] = true
			}
		}
		if s, ok := c.p.Claims["scope"].(string); ok {
			for _, p := range strings.Fields(s) {
				have[p] = true
			}
		}
	}
	p, ok := r.cfg.Principals[r.principalName(ctx, ss)]
	if !ok || r.principalName(ctx, ss) == "" {
		p = r.cfg.Principals["*"]
	}
	for _, s := range p.Permissions {
		have[s] = true
	}
	return have
}

// checkArgv refuses, before anything is spent on it, a cli call whose
// validated arguments its argv template will not place.
func checkArgv(st *state, it *catalog.Item, args map[string]any) *Error {
	e := st.owner[it.Server]
	if e == nil {
		return nil
	}
	c, ok := e.conn.(*cliConn)
	if !ok {
		return nil
	}
	if err := c.u.Check(it.UpstreamName, args); err != nil {
		var ae *cli.ArgError
		if errors.As(err, &ae) {
			ge := newError(codes.CliArgRefused, "%s", ae.Error()).withPath("args/" + ae.Arg)
			ge.quiet = true
			return ge
		}
		return newError(codes.CliArgRefused, "%s", err.Error()).withPath("args")
	}
	return nil
}

// governed is what governOutput did to a result, for its receipt.
type governed struct {
	// redacted are the paths the output policy removed or masked.
	redacted []string
	// policy is set when an output policy applied.
	policy bool
	// outputHash is the hex sha256 of the raw result's JSON.
	outputHash string
}

// governOutput checks a tool result against the tool's outputSchema and
// passes it through the tool's output policy, before the firewall, the
// artifact store or the caller see it (spec 002 §1.7, §1.8). A result
// that does not follow its schema is withheld: the caller gets
// OUTPUT_INVALID, the log the findings (paths, never values).
func (r *Runtime) governOutput(st *state, it *catalog.Item, res *mcp.CallToolResult) (*mcp.CallToolResult, governed, *Error) {
	var g governed
	if b, err := json.Marshal(res); err == nil {
		sum := sha256.Sum256(b)
		g.outputHash = hex.EncodeToString(sum[:])
	}
	var sc any
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, g, newError(codes.OutputInvalid, "the tool's structured content is not JSON").withCause(err)
		}
		if err := json.Unmarshal(b, &sc); err != nil {
			return nil, g, newError(codes.OutputInvalid, "the tool's structured content is not JSON").withCause(err)
		}
	}
	if sc != nil && !res.IsError {
		if err := it.ValidateOutput(sc); err != nil {
			r.log.Warn("tool result withheld: it does not follow the tool's outputSchema", "tool_id", it.ID, "err", err)
			return nil, g, newError(codes.OutputInvalid, "the tool's result does not follow its outputSchema; it was withheld").withCause(err)
		}
	}
	e := st.owner[it.Server]
	if e == nil {
		return res, g, nil
	}
	pol := e.policyFor(it.UpstreamName)
	if pol == nil {
		return res, g, nil
	}
	g.policy = true
	out := *res
	var paths []string
	if sc != nil {
		filtered, rep := pol.Apply(sc)
		paths = append(paths, rep.Paths()...)
		out.StructuredContent = filtered
		// The content becomes the filtered structured content as JSON
		// text (what MCP recommends beside structured content): no other
		// copy of the unfiltered data is left.
		text := "null"
		if b, err := json.Marshal(filtered); err == nil {
			text = string(b)
		}
		out.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	} else {
		out.Content = make([]mcp.Content, 0, len(res.Content))
		for i, c := range res.Content {
			kept, withheld := filterContent(pol, c)
			for _, w := range withheld {
				p := fmt.Sprintf("content[%d]", i)
				if w != "" {
					p += "." + w
				}
				paths = append(paths, p)
			}
			if kept != nil {
				out.Content = append(out.Content, kept)
			}
		}
	}
	sort.Strings(paths)
	g.redacted = paths
	return &out, g, nil
}

// filterContent passes one content item through pol: JSON text is
// filtered field by field; anything else is kept only by a policy that
// allows everything, and otherwise replaced by a note. withheld lists the
// paths removed or masked ("" for the whole item).
func filterContent(pol *outpolicy.Policy, c mcp.Content) (mcp.Content, []string) {
	if pol.AllowsEverything() {
		return c, nil
	}
	if t, ok := c.(*mcp.TextContent); ok {
		var v any
		if err := json.Unmarshal([]byte(t.Text), &v); err == nil {
			switch v.(type) {
			case map[string]any, []any:
				filtered, rep := pol.Apply(v)
				b, err := json.Marshal(filtered)
				if err != nil {
					break
				}
				return &mcp.TextContent{Text: string(b)}, rep.Paths()
			}
		}
	}
	return &mcp.TextContent{Text: withheldNote}, []string{""}
}

// withheldNote replaces content an output policy cannot filter field by
// field.
const withheldNote = "[withheld by the output policy: not JSON]"

// toolReceipt returns the tool section of the caller's receipt, created
// on first use (nil without a caller).
func toolReceipt(ctx context.Context) *receipts.Tool {
	c := callerOf(ctx)
	if c == nil {
		return nil
	}
	if c.rc.Tool == nil {
		c.rc.Tool = &receipts.Tool{Class: string(guard.ClassUnclassified)}
	}
	return c.rc.Tool
}

// recordClass puts the tool's class into the receipt: a cli manifest's
// (read, write or destructive), else the registry's.
func recordClass(ctx context.Context, st *state, it *catalog.Item) {
	t := toolReceipt(ctx)
	if t == nil {
		return
	}
	if m := manifestOf(st, it); m != nil {
		t.Class = m.Class
		return
	}
	t.Class = string(st.gate.Registry().ClassOf(it.Server, it.UpstreamName))
	if p, ok := st.gate.Registry().Lookup(it.Server, it.UpstreamName); ok && p.Destructive {
		t.Class = string(guard.ClassDestructive)
	}
}

// recordGoverned puts what governOutput did into the receipt.
func recordGoverned(ctx context.Context, g governed) {
	if t := toolReceipt(ctx); t != nil {
		t.OutputSHA256, t.RedactedPaths = g.outputHash, g.redacted
	}
}

// recordEffect puts the documents of a call's effect into the receipt.
func recordEffect(ctx context.Context, ef *firewall.Effect) {
	t := toolReceipt(ctx)
	if t == nil || ef == nil {
		return
	}
	t.BatchTotalBytes = ef.BatchTotalBytes
	for _, d := range ef.DocumentHashes {
		t.DocumentHashes = append(t.DocumentHashes, d.Pointer+"="+d.Hash)
	}
}

// stageOf names the pipeline stage a code stops a tool call at (spec 002
// §1.9).
func stageOf(code string) string {
	switch code {
	case codes.HydrateFailed, codes.ToolUnclassifiedDenied, codes.RegistryVersionMismatch:
		return receipts.StageRegistry
	case codes.ArgsInvalid, codes.SchemaInvalid, codes.CliArgRefused, codes.PathOutsideWorkspace, codes.EgressBlocked,
		codes.ToolClassDeclarationMismatch, codes.DocContentPointerInvalid, codes.DocEncodingInvalid, codes.DocHashMismatch,
		codes.IdempotencyKeyRequired, codes.InvalidParams:
		return receipts.StageValidation
	case codes.PermissionMissing, codes.ToolClassMismatch, codes.Unauthenticated, codes.ClientCredentialRejected:
		return receipts.StagePermission
	case codes.PolicyDenied, codes.ApprovalRequired, codes.RateLimited, codes.IdempotencyKeyReused, codes.IdempotencyKeyInProgress,
		codes.IdempotencyOutcomeUnknown, codes.StateUnavailable:
		return receipts.StagePolicy
	case codes.OutputInvalid, codes.ResultTooLarge, codes.DocSizeExceeded:
		return receipts.StageOutput
	}
	return receipts.StageExecution
}
