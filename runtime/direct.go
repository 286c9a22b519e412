package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/quiver-mcp/quiver/runtime/config"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/firewall"
	"github.com/quiver-mcp/quiver/toolid"
)

// exposure is what a catalog lists directly, under the names clients call:
// in direct mode every tool, prompt, resource and resource template; in
// proxy mode every prompt, resource and resource template and the tools
// matching Options.Expose; in gateway mode those tools only. It belongs to
// one state.
type exposure struct {
	// tools and prompts map an exposed name to the item's id.
	tools   map[string]string
	prompts map[string]string
	// resources maps a URI to the item's id.
	resources map[string]string
	// templates maps a URI template to the upstream serving it.
	templates map[string]ownedTemplate
	// withheld lists what could not be exposed because its name was taken,
	// one line each; clashes are those of them a tool_prefix resolves
	// (tools and prompts), which fail a start.
	withheld, clashes []string
}

// ownedTemplate is a resource template and the upstream that serves it.
type ownedTemplate struct {
	t     *mcp.ResourceTemplate
	owner conn
}

func emptyExposure() *exposure {
	return &exposure{tools: map[string]string{}, prompts: map[string]string{}, resources: map[string]string{}, templates: map[string]ownedTemplate{}}
}

// exposes reports whether a runtime lists anything directly.
func (r *Runtime) exposes() bool {
	return r.listsPrimitives() || len(r.cfg.Expose.Direct) > 0
}

// listsPrimitives reports whether the catalog's prompts, resources and
// resource templates are listed by prompts/list and resources/list: in
// direct mode and in proxy mode (the transparent one); a gateway finds
// them with resource_browse and prompt_browse, and its lists are empty.
func (r *Runtime) listsPrimitives() bool {
	return r.cfg.Mode == config.ModeDirect || r.cfg.Mode == config.ModeProxy
}

// prefixOf is the tool_prefix of the upstream serving server.
func prefixOf(owner map[string]*upstreamEntry, server string) string {
	if e := owner[server]; e != nil {
		return e.prefix
	}
	return ""
}

// exposedTool reports whether a tool is listed directly: every tool in
// direct mode; in gateway and proxy mode one a glob of Options.Expose
// matches by its tool_id, its upstream name or its exposed name.
func (r *Runtime) exposedTool(it *catalog.Item, name string) bool {
	if r.cfg.Mode == config.ModeDirect {
		return true
	}
	return matchAny(r.cfg.Expose.Direct, it.ID, it.UpstreamName, name)
}

// matchAny reports whether one of globs matches one of names.
func matchAny(globs []string, names ...string) bool {
	for _, g := range globs {
		for _, n := range names {
			if ok, _ := path.Match(g, n); ok {
				return true
			}
		}
	}
	return false
}

// expose computes the exposure of a new catalog. A name keeps the item it
// had in prev, so an item that appears later never shadows one already
// listed: it is withheld and reported. Among new names, configuration
// order decides. Meta-tool names are reserved.
func (r *Runtime) expose(prev *exposure, snap *catalog.Snapshot, ups []*upstreamEntry, owner map[string]*upstreamEntry, templates map[string][]*mcp.ResourceTemplate) *exposure {
	next := emptyExposure()
	if !r.exposes() {
		return next
	}
	reserved := map[string]bool{}
	for _, t := range r.metaTools() {
		reserved[t.Name] = true
	}
	if r.cfg.Mode != config.ModeDirect {
		// The resource and prompt verbs come and go with the catalog.
		for _, n := range []string{ResourceBrowse, ResourceRead, PromptBrowse, PromptGet} {
			reserved[n] = true
		}
	}
	type claim struct {
		name string
		it   *catalog.Item
	}
	assign := func(kind toolid.Kind, names map[string]string, prevNames map[string]string, what string) {
		var claims []claim
		for _, it := range snap.Items(kind) {
			name := it.UpstreamName
			if kind != toolid.KindResource {
				name = prefixOf(owner, it.Server) + it.UpstreamName
			}
			if kind == toolid.KindTool && !r.exposedTool(it, name) {
				continue
			}
			if kind == toolid.KindTool && !it.SchemaOK() {
				// Its schema failed the catalog's checks: listing it would
				// hand the client a schema it cannot use.
				next.withheld = append(next.withheld, fmt.Sprintf("tool %q of server %q: its input schema failed the catalog's checks", name, it.Server))
				continue
			}
			if other, ok := snap.LookupWire(name); ok && kind == toolid.KindTool && r.cfg.Mode == config.ModeProxy && other.ID != it.ID {
				// Proxy mode lists the other tool's entry under this
				// name, whoever held it before.
				w := fmt.Sprintf("%s %q of server %q: the name is the proxy entry of %s (set tool_prefix)", what, name, it.Server, other.ID)
				next.withheld, next.clashes = append(next.withheld, w), append(next.clashes, w)
				continue
			}
			claims = append(claims, claim{name, it})
		}
		// Names held before stay with their holder.
		for _, c := range claims {
			if prevNames[c.name] == c.it.ID {
				names[c.name] = c.it.ID
			}
		}
		for _, c := range claims {
			if names[c.name] == c.it.ID {
				continue
			}
			holder, taken := names[c.name]
			// Only an exposed tool's collision fails a start in proxy
			// mode: its prompts were not listed by name before, and a
			// withheld one stays at hand through prompt_get.
			fatal := kind == toolid.KindTool || r.cfg.Mode == config.ModeDirect
			switch {
			case reserved[c.name] && kind == toolid.KindTool:
				w := fmt.Sprintf("%s %q of server %q: the name is a quiver meta-tool's (set tool_prefix)", what, c.name, c.it.Server)
				next.withheld, next.clashes = append(next.withheld, w), append(next.clashes, w)
			case taken && kind == toolid.KindResource:
				// A URI is no name to prefix: the first upstream serves it.
				other, _ := snap.Lookup(holder)
				next.withheld = append(next.withheld, fmt.Sprintf("%s %q of server %q: server %q serves the same URI", what, c.name, c.it.Server, other.Server))
			case taken:
				other, _ := snap.Lookup(holder)
				w := fmt.Sprintf("%s %q of server %q: the name is taken by server %q (set tool_prefix)", what, c.name, c.it.Server, other.Server)
				next.withheld = append(next.withheld, w)
				if fatal {
					next.clashes = append(next.clashes, w)
				}
			default:
				names[c.name] = c.it.ID
			}
		}
	}
	assign(toolid.KindTool, next.tools, prev.tools, "tool")
	if !r.listsPrimitives() {
		return next
	}
	assign(toolid.KindPrompt, next.prompts, prev.prompts, "prompt")
	assign(toolid.KindResource, next.resources, prev.resources, "resource")
	for _, c := range ups {
		for _, t := range templates[c.name()] {
			if o, taken := next.templates[t.URITemplate]; taken {
				next.withheld = append(next.withheld, fmt.Sprintf("resource template %q of upstream %q: also served by upstream %q", t.URITemplate, c.name(), o.owner.name()))
				continue
			}
			next.templates[t.URITemplate] = ownedTemplate{t: t, owner: c}
		}
	}
	return next
}

// syncExposure updates the server's directly listed tools, prompts,
// resources and templates from old to next (the go-sdk announces the list
// changes to every session).
func (r *Runtime) syncExposure(old, next *state) {
	if !r.exposes() {
		return
	}
	for _, w := range next.exp.withheld {
		if !slices.Contains(old.exp.withheld, w) {
			r.log.Warn("not listed directly: name collision", "what", w)
		}
	}
	r.met.withheld(len(next.exp.withheld))
	var goneTmpl []string
	for ut, o := range old.exp.templates {
		if n, ok := next.exp.templates[ut]; !ok || n.owner != o.owner || !sameTemplate(n.t, o.t) {
			goneTmpl = append(goneTmpl, ut)
		}
	}
	if gone := removed(old.exp.tools, next.exp.tools); len(gone) > 0 {
		r.server.RemoveTools(gone...)
	}
	if gone := removed(old.exp.prompts, next.exp.prompts); len(gone) > 0 {
		r.server.RemovePrompts(gone...)
	}
	if gone := removed(old.exp.resources, next.exp.resources); len(gone) > 0 {
		r.server.RemoveResources(gone...)
	}
	if len(goneTmpl) > 0 {
		r.server.RemoveResourceTemplates(goneTmpl...)
	}
	for _, a := range added(old, next, old.exp.tools, next.exp.tools) {
		t, err := directTool(a.name, a.it)
		if err == nil {
			err = guarded(func() { r.server.AddTool(t, r.handleDirect) })
		}
		if err != nil {
			r.log.Warn("tool not listed directly", "tool_id", a.it.ID, "err", err)
		}
	}
	for _, a := range added(old, next, old.exp.prompts, next.exp.prompts) {
		if err := guarded(func() { r.server.AddPrompt(directPrompt(a.name, a.it), r.handleDirectPrompt) }); err != nil {
			r.log.Warn("prompt not listed directly", "prompt_id", a.it.ID, "err", err)
		}
	}
	for _, a := range added(old, next, old.exp.resources, next.exp.resources) {
		d := a.it.Resource
		res := &mcp.Resource{URI: d.URI, Name: d.Name, Title: d.Title, Description: d.Description, MIMEType: d.MIMEType, Size: d.Size, Meta: d.Meta}
		if err := guarded(func() { r.server.AddResource(res, r.handleDirectResource) }); err != nil {
			r.log.Warn("resource not listed directly", "resource_id", a.it.ID, "err", err)
		}
	}
	for _, ut := range sortedKeys(next.exp.templates) {
		n := next.exp.templates[ut]
		if o, ok := old.exp.templates[ut]; ok && o.owner == n.owner && sameTemplate(o.t, n.t) {
			continue
		}
		t := *n.t
		if err := guarded(func() { r.server.AddResourceTemplate(&t, r.handleDirectResource) }); err != nil {
			r.log.Warn("resource template not listed directly", "upstream", n.owner.name(), "uri_template", ut, "err", err)
		}
	}
}

// guarded runs one registration with the go-sdk server, which panics on
// definitions it cannot serve (an input schema that is not an object, an
// invalid URI template, ...); an upstream's definitions are outside input,
// so such a panic becomes an error and the item is not listed.
func guarded(add func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the definition cannot be served: %v", v)
		}
	}()
	add()
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonEqual(a, b any) bool { return compactJSON(a) == compactJSON(b) }

// removed returns the names old lists and next does not list as the same
// item.
func removed(old, next map[string]string) []string {
	var gone []string
	for name, id := range old {
		if nid, ok := next[name]; !ok || nid != id {
			gone = append(gone, name)
		}
	}
	return gone
}

// exposed is one name next lists and the item it lists under it.
type exposed struct {
	name string
	it   *catalog.Item
}

// added returns, in name order, what next lists that old did not list
// with the same definition (the go-sdk replaces an entry added again).
func added(old, next *state, oldNames, nextNames map[string]string) []exposed {
	var out []exposed
	for _, name := range sortedKeys(nextNames) {
		id := nextNames[name]
		it, _ := next.snap.Lookup(id)
		if prevID, ok := oldNames[name]; ok && prevID == id {
			if prev, ok := old.snap.Lookup(id); ok && sameDefinition(prev, it) {
				continue
			}
		}
		out = append(out, exposed{name, it})
	}
	return out
}

func sameDefinition(a, b *catalog.Item) bool {
	return jsonEqual(a.Tool, b.Tool) && jsonEqual(a.Prompt, b.Prompt) && jsonEqual(a.Resource, b.Resource)
}

func sameTemplate(a, b *mcp.ResourceTemplate) bool { return jsonEqual(a, b) }

// directTool is the listed definition of a directly exposed tool: the
// upstream's own, under its exposed name.
func directTool(name string, it *catalog.Item) (*mcp.Tool, error) {
	d := it.Tool
	if d == nil {
		return nil, fmt.Errorf("no definition")
	}
	t := &mcp.Tool{Name: name, Title: d.Title, Description: d.Description, Meta: d.Meta}
	t.InputSchema = d.InputSchema
	if len(d.InputSchema) == 0 {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	} else {
		var m map[string]any
		if err := json.Unmarshal(d.InputSchema, &m); err != nil || m == nil {
			return nil, fmt.Errorf("the input schema is not a JSON object")
		}
		if m["type"] != "object" {
			return nil, fmt.Errorf("the input schema's type is %v, not object", m["type"])
		}
	}
	if len(d.OutputSchema) > 0 {
		t.OutputSchema = d.OutputSchema
	}
	if len(d.Annotations) > 0 {
		var a mcp.ToolAnnotations
		if b, err := json.Marshal(d.Annotations); err == nil && json.Unmarshal(b, &a) == nil {
			t.Annotations = &a
		}
	}
	return t, nil
}

func directPrompt(name string, it *catalog.Item) *mcp.Prompt {
	d := it.Prompt
	p := &mcp.Prompt{Name: name, Title: d.Title, Description: d.Description, Meta: d.Meta}
	for _, a := range d.Arguments {
		p.Arguments = append(p.Arguments, &mcp.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
	}
	return p
}

// handleDirect runs a directly listed tool through the tool_execute
// pipeline: validation, guards, policy, controls, receipts, and the
// firewall for large results.
func (r *Runtime) handleDirect(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	st := r.state.Load()
	id, ok := st.exp.tools[req.Params.Name]
	it, found := st.snap.Lookup(id)
	callerOf(ctx).name("direct")
	if !ok || !found || r.concealed(ctx, st, it) {
		// A tool the caller may not see is refused as the go-sdk refuses
		// a name it does not list.
		return nil, unknownTool(req.Params.Name)
	}
	return toolCall(ctx, "direct", func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		a := &executeArgs{ToolID: id, Args: req.Params.Arguments}
		if e := directMeta(req.Params.Meta, a); e != nil {
			return nil, e
		}
		return r.execute(ctx, req.Session, a, true)
	})
}

// unknownTool, unknownPrompt and the go-sdk's ResourceNotFoundError are
// the go-sdk's own refusals of a name or URI it does not list: the answer
// to one a caller may not see, so that the two cannot be told apart.
func unknownTool(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

func unknownPrompt(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name)}
}

// The _meta keys by which a direct call passes what tool_execute takes as
// arguments beside the tool's own: a write tool's idempotency key, and the
// document hashes a write expects.
const (
	MetaIdempotencyKey         = "dev.quiver-mcp/idempotency_key"
	MetaExpectedDocumentHashes = "dev.quiver-mcp/expected_document_hashes"
)

// directMeta reads the _meta keys of a direct call into a.
func directMeta(m mcp.Meta, a *executeArgs) *Error {
	if v, ok := m[MetaIdempotencyKey]; ok {
		k, ok := v.(string)
		if !ok {
			return newError(CodeArgsInvalid, "_meta %s must be a string", MetaIdempotencyKey).withPath("_meta")
		}
		a.IdempotencyKey = &k
	}
	if v, ok := m[MetaExpectedDocumentHashes]; ok {
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, &a.ExpectedDocumentHashes)
		}
		if err != nil {
			return newError(CodeArgsInvalid, "_meta %s must be a list of {pointer, hash}", MetaExpectedDocumentHashes).withPath("_meta")
		}
	}
	return capabilityMeta(m, a)
}

// directMaxBinary is the most binary content (base64 bytes) a direct
// result carries inline; past it the firewall stores the result.
const directMaxBinary = 1 << 20

// verbatim reports whether a direct call's result goes to the client as
// the upstream sent it: the firewall is off (for everything, or for this
// tool), or the result is small: its text within the inline token budget
// and its binary content within directMaxBinary.
func (r *Runtime) verbatim(it *catalog.Item, res *mcp.CallToolResult) bool {
	if r.fw == nil || r.firewallOffFor(it) {
		return true
	}
	budget := r.inlineBudget()
	var text strings.Builder
	binary := 0
	for _, c := range res.Content {
		switch v := c.(type) {
		case *mcp.TextContent:
			text.WriteString(v.Text)
		case *mcp.ImageContent:
			binary += len(v.Data)
		case *mcp.AudioContent:
			binary += len(v.Data)
		case *mcp.EmbeddedResource:
			if v.Resource != nil {
				text.WriteString(v.Resource.Text)
				binary += len(v.Resource.Blob)
			}
		}
	}
	if res.StructuredContent != nil {
		text.WriteString(compactJSON(res.StructuredContent))
	}
	if binary > directMaxBinary {
		return false
	}
	// A cl100k token is at least one byte, so a short text needs no count.
	if text.Len() <= budget {
		return true
	}
	return r.cards.Counter().Count(text.String()) <= budget
}

// firewallOffFor reports whether Options.FirewallOffFor exempts a tool from
// the firewall: its results are returned inline, however large.
func (r *Runtime) firewallOffFor(it *catalog.Item) bool {
	return len(r.cfg.Firewall.OffFor) > 0 && matchAny(r.cfg.Firewall.OffFor, it.ID, it.UpstreamName)
}

// inlineBudget is the most tokens of text a result may carry inline.
func (r *Runtime) inlineBudget() int {
	if b := r.cfg.Firewall.MaxInlineTokens; b > 0 {
		return b
	}
	return firewall.DefaultMaxInlineTokens
}

// fittingStructured returns the structured content of a successful result
// of a tool that declares an outputSchema when it alone fits the inline
// budget: the firewall keeps the rest of the result (its content, often
// the same data as text) out of the context, and what the schema
// describes still reaches the client. nil otherwise.
func (r *Runtime) fittingStructured(it *catalog.Item, res *mcp.CallToolResult) json.RawMessage {
	if it.Tool == nil || len(it.Tool.OutputSchema) == 0 || res.IsError || res.StructuredContent == nil {
		return nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil || string(b) == "null" {
		return nil
	}
	if budget := r.inlineBudget(); len(b) > budget && r.cards.Counter().Count(string(b)) > budget {
		return nil
	}
	return b
}

// noSchemaEnvelope is the note of a direct result marked isError only
// because the tool's outputSchema cannot describe the envelope.
const noSchemaEnvelope = "quiver: the tool succeeded, but its result is over firewall.max_inline_tokens and its outputSchema cannot describe quiver's envelope, so the result is marked isError; read it from the envelope's artifacts with tool_view, or exempt the tool with firewall.off_for."

// directResult is what a direct call answers for an envelope the firewall
// shaped: the envelope as text, so the client learns the artifact handles
// to read with tool_view. A tool that declares an outputSchema must answer
// a success with structured content that follows it (the TypeScript
// client throws otherwise; an isError result is exempt), and the envelope
// does not follow it: the envelope goes as text beside sc (the upstream's
// own structured content, when fittingStructured let it through), or, when
// there is none, the result is marked isError with a note saying why.
func directResult(env firewall.Envelope, isError bool, it *catalog.Item, sc json.RawMessage) *mcp.CallToolResult {
	if env.Firewall.Strategy == firewall.StrategyInline && env.Result != nil {
		if res, err := inlineResult(env.Result, isError); err == nil {
			return res
		}
	}
	out := envelopeResult(env, isError)
	if it.Tool == nil || len(it.Tool.OutputSchema) == 0 {
		return out
	}
	out.StructuredContent = nil
	switch {
	case isError:
	case sc != nil:
		out.StructuredContent = sc
	default:
		out.IsError = true
		out.Content = append(out.Content, &mcp.TextContent{Text: noSchemaEnvelope})
	}
	return out
}

// inlineResult rebuilds a tool result from the content an envelope carries
// inline (an idempotent replay of a direct call).
func inlineResult(in *firewall.Inline, isError bool) (*mcp.CallToolResult, error) {
	wire := struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
		IsError           bool              `json:"isError,omitempty"`
	}{in.Content, in.StructuredContent, isError}
	if wire.Content == nil {
		wire.Content = []json.RawMessage{}
	}
	b, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// compactJSON is v as JSON, or "" when it cannot be encoded.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
