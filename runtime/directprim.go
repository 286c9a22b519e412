package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/toolid"
	"github.com/yosida95/uritemplate/v3"
)

// handleDirectPrompt renders a directly listed prompt upstream and returns
// the upstream's answer as it is.
func (r *Runtime) handleDirectPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	st := r.state.Load()
	id, ok := st.exp.prompts[req.Params.Name]
	it, found := st.snap.Lookup(id)
	if !ok || !found || r.hidden(ctx, st, it) {
		return nil, unknownPrompt(req.Params.Name)
	}
	var out *mcp.GetPromptResult
	err := run(func() *Error {
		raw, _ := json.Marshal(req.Params.Arguments)
		if e := r.authorize(ctx, st, it, raw, false); e != nil {
			return e
		}
		args, e := promptArgs(it.Prompt, raw)
		if e != nil {
			return e
		}
		c, ok := st.owner[it.Server]
		if !ok {
			return newError(CodeUpstreamUnavailable, "the upstream of prompt %q is not connected", req.Params.Name)
		}
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Timing.CallTimeout)
		defer cancel()
		res, err := c.getPrompt(cctx, it, args)
		if err != nil {
			return classify(err)
		}
		if res.NeedsInput() {
			out = &mcp.GetPromptResult{InputRequests: res.InputRequests, RequestState: res.RequestState}
			return nil
		}
		out = &mcp.GetPromptResult{Meta: scrubMeta(res.Meta), Description: res.Description, Messages: res.Messages}
		return nil
	})
	return out, err
}

// handleDirectResource reads a directly listed resource, or a URI of a
// directly listed template, upstream and returns the upstream's answer as
// it is.
func (r *Runtime) handleDirectResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	st := r.state.Load()
	it, c, e := r.resourceOwner(ctx, st, req.Params.URI)
	if e != nil && e.Code == CodeResourceNotFound {
		// What the caller may not see is refused as the go-sdk refuses
		// a URI it does not list.
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	if e != nil {
		return nil, e
	}
	var out *mcp.ReadResourceResult
	err := run(func() *Error {
		if e := r.authorize(ctx, st, it, nil, false); e != nil {
			return e
		}
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Timing.CallTimeout)
		defer cancel()
		res, err := c.readResource(cctx, it)
		if err != nil {
			return classify(err)
		}
		if res.NeedsInput() {
			out = &mcp.ReadResourceResult{InputRequests: res.InputRequests, RequestState: res.RequestState}
			return nil
		}
		out = &mcp.ReadResourceResult{Meta: scrubMeta(res.Meta), Contents: res.Contents}
		return nil
	})
	return out, err
}

// resourceOwner finds what a URI addresses in direct mode: a listed
// resource, or a URI one listed template matches (then a catalog item is
// made for it, so that policy and receipts see the template's upstream).
func (r *Runtime) resourceOwner(ctx context.Context, st *state, uri string) (*catalog.Item, conn, *Error) {
	if id, ok := st.exp.resources[uri]; ok {
		it, found := st.snap.Lookup(id)
		if found && !r.hidden(ctx, st, it) {
			if c, ok := st.owner[it.Server]; ok {
				return it, c, nil
			}
			return nil, nil, newError(CodeUpstreamUnavailable, "the upstream of resource %q is not connected", uri)
		}
	}
	for _, ut := range sortedKeys(st.exp.templates) {
		o := st.exp.templates[ut]
		t, err := uritemplate.New(ut)
		if err != nil || !t.Regexp().MatchString(uri) {
			continue
		}
		it := templateItem(o.owner.name(), uri)
		if r.hidden(ctx, st, it) {
			break
		}
		return it, o.owner, nil
	}
	return nil, nil, newError(CodeResourceNotFound, "no resource with URI %q", uri)
}

// handleComplete forwards completion/complete to the upstream serving the
// reference: a prompt (by its direct name or its prompt id) or a resource
// template (by its URI template) or resource.
func (r *Runtime) handleComplete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var out *mcp.CompleteResult
	err := run(func() *Error {
		if req.Params == nil || req.Params.Ref == nil {
			return newError(CodeArgsInvalid, "completion/complete needs a ref")
		}
		st := r.state.Load()
		p := *req.Params
		ref := *req.Params.Ref
		p.Ref = &ref
		var c conn
		switch ref.Type {
		case "ref/prompt":
			id, ok := st.exp.prompts[ref.Name]
			if !ok {
				id = ref.Name
			}
			it, found := st.snap.Lookup(id)
			if !found || it.Kind != toolid.KindPrompt || !r.visible(ctx, st, it) {
				return newError(CodePromptNotFound, "no prompt named %q", ref.Name)
			}
			ref.Name = it.UpstreamName
			if c, found = st.owner[it.Server]; !found {
				return newError(CodeUpstreamUnavailable, "the upstream of prompt %q is not connected", ref.Name)
			}
		case "ref/resource":
			if o, ok := st.exp.templates[ref.URI]; ok {
				if !r.visible(ctx, st, templateItem(o.owner.name(), ref.URI)) {
					return newError(CodeResourceNotFound, "no resource template %q", ref.URI)
				}
				c = o.owner
				break
			}
			_, owner, e := r.resourceOwner(ctx, st, ref.URI)
			if e != nil {
				return e
			}
			c = owner
		default:
			return newError(CodeArgsInvalid, "unknown reference type %q", ref.Type)
		}
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Timing.CallTimeout)
		defer cancel()
		res, err := c.complete(cctx, &p)
		if err != nil {
			return classify(err)
		}
		out = &mcp.CompleteResult{Meta: scrubMeta(res.Meta), Completion: res.Completion}
		return nil
	})
	return out, err
}

// handleSubscribe subscribes the upstream serving a resource to its
// updates, once for all downstream subscribers (the go-sdk keeps track of
// which sessions subscribed and delivers notifications/resources/updated
// to them).
func (r *Runtime) handleSubscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	return run(func() *Error {
		st := r.state.Load()
		_, c, e := r.resourceOwner(ctx, st, req.Params.URI)
		if e != nil {
			return e
		}
		r.watch(req.Session)
		if !r.subs.add(c.name(), req.Params.URI, req.Session) {
			return nil
		}
		if err := c.subscribe(ctx, req.Params.URI, true); err != nil {
			r.subs.remove(c.name(), req.Params.URI, req.Session)
			return classify(err)
		}
		return nil
	})
}

// handleUnsubscribe ends a subscription; the upstream is unsubscribed when
// its last downstream subscriber leaves.
func (r *Runtime) handleUnsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	return run(func() *Error {
		st := r.state.Load()
		_, c, e := r.resourceOwner(ctx, st, req.Params.URI)
		if e != nil {
			return e
		}
		if r.subs.remove(c.name(), req.Params.URI, req.Session) {
			if err := c.subscribe(ctx, req.Params.URI, false); err != nil && !errors.Is(err, context.Canceled) {
				r.log.Debug("upstream unsubscribe failed", "upstream", c.name(), "err", err)
			}
		}
		return nil
	})
}

// templateItem is the catalog item standing for a URI (or the URI template
// itself) served by a resource template of upstream server: templates are
// not catalog items, but policy and receipts need one.
func templateItem(server, uri string) *catalog.Item {
	return &catalog.Item{ID: string(toolid.KindResource) + "::" + server + "/" + uri, Kind: toolid.KindResource,
		Server: server, Namespace: toolid.Namespace(server), UpstreamName: uri}
}

// reservedMeta is the _meta key prefix the MCP specification reserves for
// itself.
const reservedMeta = "io.modelcontextprotocol/"

// scrubMeta drops, from the _meta of a result passed on as it is, the
// reserved keys: they describe the upstream session (its server info, its
// protocol), not quiver's session with the client.
func scrubMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if strings.HasPrefix(k, reservedMeta) {
			continue
		}
		if out == nil {
			out = mcp.Meta{}
		}
		out[k] = v
	}
	return out
}

// verbatimResult is a tool result as quiver passes it on: the upstream's,
// less what belongs to the upstream session's protocol (reserved _meta
// keys, the result type of protocol 2026-07-28). It is a new value: the
// upstream's may be shared with the cache.
func verbatimResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: scrubMeta(res.Meta), Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}
}
