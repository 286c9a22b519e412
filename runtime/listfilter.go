package runtime

import (
	"context"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/toolid"
)

// listed are the list methods listFilter shapes.
var listed = map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true, "resources/templates/list": true}

// listFilter is the receiving middleware that shapes the list methods per
// caller (spec 001 MUST 3): the go-sdk's listings are global, so entries
// the caller may not see are removed from each page. It runs inside
// receive, which put the caller in ctx and writes the receipt.
func (r *Runtime) listFilter(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || !listed[method] || !r.filtering() || res == nil {
			return res, err
		}
		return r.filterList(ctx, res), nil
	}
}

// filterList removes from one page of a listing what the caller may not
// see. Entries that are not catalog items (the meta-tools) stay.
func (r *Runtime) filterList(ctx context.Context, res mcp.Result) mcp.Result {
	st := r.state.Load()
	ctx = r.auth.pin(ctx)
	hidden := func(id string, kind toolid.Kind) bool {
		it, ok := st.snap.Lookup(id)
		return ok && it.Kind == kind && !r.visible(ctx, st, it)
	}
	switch lr := res.(type) {
	case *mcp.ListToolsResult:
		out := *lr
		out.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool {
			if kind, ok := primitiveVerbs[t.Name]; ok && r.cfg.Mode != config.ModeDirect && st.exp.tools[t.Name] == "" {
				// A verb of resources or prompts is listed to a caller
				// who may see one of them.
				return !r.seesAny(ctx, st, kind)
			}
			// A directly exposed tool is listed by its exposed name, a
			// proxy-mode entry by its wire name; the meta-tools are
			// neither and stay.
			id := t.Name
			if d, ok := st.exp.tools[t.Name]; ok {
				id = d
			} else if it, ok := st.snap.LookupWire(t.Name); ok {
				id = it.ID
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

// primitiveVerbs are the meta-tools of resources and prompts, by the kind
// they serve.
var primitiveVerbs = map[string]toolid.Kind{
	ResourceBrowse: toolid.KindResource, ResourceRead: toolid.KindResource,
	PromptBrowse: toolid.KindPrompt, PromptGet: toolid.KindPrompt,
}

// seesAny reports whether the caller may see an item of kind: the verbs of
// a kind it sees none of are neither listed nor callable for it, so that
// they do not tell it that some upstream offers resources or prompts.
func (r *Runtime) seesAny(ctx context.Context, st *state, kind toolid.Kind) bool {
	for _, it := range st.snap.Items(kind) {
		if r.visible(ctx, st, it) {
			return true
		}
	}
	return false
}

// unlisted answers a call of a primitive verb the caller sees nothing of
// as the go-sdk answers a tool it does not list (nil when it sees some).
func (r *Runtime) unlisted(ctx context.Context, name string) error {
	if !r.filtering() {
		return nil
	}
	if r.seesAny(r.auth.pin(ctx), r.state.Load(), primitiveVerbs[name]) {
		return nil
	}
	if c := callerOf(ctx); c != nil {
		c.name(name)
		c.reasons = append(c.reasons, ReasonConcealed)
	}
	return unknownTool(name)
}
