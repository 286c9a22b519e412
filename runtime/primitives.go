package runtime

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/firewall"
	"github.com/quiver-mcp/quiver/toolid"
)

// Resource and prompt verbs (spec 003 §9.4). They are listed only while
// some upstream offers the primitive.
const (
	ResourceBrowse = "resource_browse"
	ResourceRead   = "resource_read"
	PromptBrowse   = "prompt_browse"
	PromptGet      = "prompt_get"
)

// maxPromptArgs bounds the arguments of one prompt_get.
const maxPromptArgs = 64

func primitiveBrowseSchema(what string) json.RawMessage {
	return json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
		`"query":{"type":"string","minLength":1,"maxLength":2000,"description":"The ` + what + ` you want, in plain words."},` +
		`"path":{"type":"string","maxLength":1024,"description":"A catalog path to list, e.g. \"/\"."},` +
		`"top_k":{"type":"integer","minimum":1,"maximum":50,"description":"Cards to return (default 10)."},` +
		`"cursor":{"type":"string","maxLength":512,"description":"next_cursor of a previous path browse."}}}`)
}

var resourceReadSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["resource_id"],"properties":{` +
	`"resource_id":{"type":"string","minLength":1,"maxLength":256,"description":"The id of a resource card."}}}`)

var promptGetSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["prompt_id"],"properties":{` +
	`"prompt_id":{"type":"string","minLength":1,"maxLength":256,"description":"The id of a prompt card."},` +
	`"args":{"type":"object","additionalProperties":{"type":"string"},"description":"The prompt's arguments, as its card's hydration lists them."}}}`)

func readOnlyAnnotations() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
}

// syncPrimitiveVerbs lists the resource and prompt verbs exactly while the
// catalog holds resources or prompts.
func (r *Runtime) syncPrimitiveVerbs(old, next *state) {
	sync := func(kind toolid.Kind, tools []*mcp.Tool, handlers []mcp.ToolHandler) {
		has, had := len(next.snap.Items(kind)) > 0, len(old.snap.Items(kind)) > 0
		switch {
		case has && !had:
			for i, t := range tools {
				r.server.AddTool(t, handlers[i])
			}
		case had && !has:
			for _, t := range tools {
				r.server.RemoveTools(t.Name)
			}
		}
	}
	sync(toolid.KindResource, []*mcp.Tool{
		{Name: ResourceBrowse, InputSchema: primitiveBrowseSchema("resource"), Annotations: readOnlyAnnotations(),
			Description: "Find resources (files, documents, records) the fleet offers, by plain-words query or path. Returns cards; read one with resource_read."},
		{Name: ResourceRead, InputSchema: resourceReadSchema, Annotations: readOnlyAnnotations(),
			Description: "Read a resource by its card id. Large contents come back as artifacts to slice with tool_view."},
	}, []mcp.ToolHandler{r.handleResourceBrowse, r.handleResourceRead})
	sync(toolid.KindPrompt, []*mcp.Tool{
		{Name: PromptBrowse, InputSchema: primitiveBrowseSchema("prompt"), Annotations: readOnlyAnnotations(),
			Description: "Find prompt templates the fleet offers, by plain-words query or path. Returns cards; render one with prompt_get."},
		{Name: PromptGet, InputSchema: promptGetSchema, Annotations: readOnlyAnnotations(),
			Description: "Render a prompt by its card id with its arguments (strings)."},
	}, []mcp.ToolHandler{r.handlePromptBrowse, r.handlePromptGet})
}

func (r *Runtime) handleResourceBrowse(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := r.unlisted(ctx, ResourceBrowse); err != nil {
		return nil, err
	}
	return toolCall(ctx, ResourceBrowse, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a browseArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		return r.browse(ctx, req.Session, toolid.KindResource, a)
	})
}

func (r *Runtime) handlePromptBrowse(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := r.unlisted(ctx, PromptBrowse); err != nil {
		return nil, err
	}
	return toolCall(ctx, PromptBrowse, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a browseArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		return r.browse(ctx, req.Session, toolid.KindPrompt, a)
	})
}

type resourceReadArgs struct {
	ResourceID string `json:"resource_id"`
}

func (r *Runtime) handleResourceRead(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := r.unlisted(ctx, ResourceRead); err != nil {
		return nil, err
	}
	return toolCall(ctx, ResourceRead, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a resourceReadArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		st := r.state.Load()
		it, ok := st.snap.Lookup(a.ResourceID)
		if !ok || it.Kind != toolid.KindResource || r.hidden(ctx, st, it) {
			return nil, newError(CodeResourceNotFound, "no resource with id %q in the current catalog", a.ResourceID).withPath("resource_id")
		}
		if e := r.authorize(ctx, st, it, nil, false); e != nil {
			return nil, e.withDetail("resource_id", it.ID)
		}
		c, ok := st.owner[it.Server]
		if !ok {
			return nil, newError(CodeUpstreamUnavailable, "the upstream of %q is not connected", it.ID)
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Timing.CallTimeout)
		defer cancel()
		res, err := c.readResource(cctx, it)
		if err != nil {
			return nil, classify(err).withDetail("resource_id", it.ID)
		}
		if res.NeedsInput() {
			return &mcp.CallToolResult{InputRequests: res.InputRequests, RequestState: res.RequestState}, nil
		}
		env, e := r.shape(ctx, req.Session, it, firewall.Result{Parts: resourceParts(res.Contents)}, time.Since(start))
		if e != nil {
			return nil, e.withDetail("resource_id", it.ID)
		}
		return envelopeResult(env, false), nil
	})
}

type promptGetArgs struct {
	PromptID string          `json:"prompt_id"`
	Args     json.RawMessage `json:"args"`
}

func (r *Runtime) handlePromptGet(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := r.unlisted(ctx, PromptGet); err != nil {
		return nil, err
	}
	return toolCall(ctx, PromptGet, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a promptGetArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		st := r.state.Load()
		it, ok := st.snap.Lookup(a.PromptID)
		if !ok || it.Kind != toolid.KindPrompt || r.hidden(ctx, st, it) {
			return nil, newError(CodePromptNotFound, "no prompt with id %q in the current catalog", a.PromptID).withPath("prompt_id")
		}
		if e := r.authorize(ctx, st, it, a.Args, false); e != nil {
			return nil, e.withDetail("prompt_id", it.ID)
		}
		args, e := promptArgs(it.Prompt, a.Args)
		if e != nil {
			return nil, e
		}
		c, ok := st.owner[it.Server]
		if !ok {
			return nil, newError(CodeUpstreamUnavailable, "the upstream of %q is not connected", it.ID)
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Timing.CallTimeout)
		defer cancel()
		res, err := c.getPrompt(cctx, it, args)
		if err != nil {
			return nil, classify(err).withDetail("prompt_id", it.ID)
		}
		if res.NeedsInput() {
			return &mcp.CallToolResult{InputRequests: res.InputRequests, RequestState: res.RequestState}, nil
		}
		env, e := r.shape(ctx, req.Session, it, firewall.Result{Parts: promptParts(res.Messages)}, time.Since(start))
		if e != nil {
			return nil, e.withDetail("prompt_id", it.ID)
		}
		if res.Description != "" {
			env.Facts = append(env.Facts, sanitize("prompt: "+res.Description))
		}
		return envelopeResult(env, false), nil
	})
}

// promptArgs validates prompt_get arguments against the prompt's declared
// arguments: every value a string, required ones present, unknown names
// refused (the same ARGS_INVALID contract as tool arguments).
func promptArgs(p *catalog.PromptDef, raw json.RawMessage) (map[string]string, *Error) {
	args := map[string]string{}
	if len(raw) > 0 && string(raw) != "null" {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, newError(CodeArgsInvalid, "args must be an object of strings").withPath("args")
		}
		if len(m) > maxPromptArgs {
			return nil, newError(CodeArgsInvalid, "more than %d arguments", maxPromptArgs).withPath("args")
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return nil, newError(CodeArgsInvalid, "argument %q must be a string", k).withPath("args/" + k)
			}
			args[k] = s
		}
	}
	declared := map[string]bool{}
	var findings []map[string]string
	for _, d := range p.Arguments {
		declared[d.Name] = true
		if _, ok := args[d.Name]; d.Required && !ok {
			findings = append(findings, map[string]string{"path": "/" + d.Name, "message": "required argument missing"})
		}
	}
	var unknown []string
	for k := range args {
		if !declared[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		findings = append(findings, map[string]string{"path": "/" + k, "message": "the prompt declares no such argument"})
	}
	if len(findings) > 0 {
		e := newError(CodeArgsInvalid, "invalid prompt arguments: %s %s", findings[0]["path"], findings[0]["message"]).withPath("args")
		return nil, e.withDetail("findings", findings)
	}
	return args, nil
}
