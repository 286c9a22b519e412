package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/quiver-mcp/quiver/runtime/config"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/toolid"
)

// Meta-tool names.
const (
	ToolBrowse  = "tool_browse"
	ToolHydrate = "tool_hydrate"
	ToolExecute = "tool_execute"
	ToolView    = "tool_view"
)

// maxMetaArgs bounds the arguments of one meta-tool call; larger requests
// are refused before they are decoded.
const maxMetaArgs = 4 << 20

var browseSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
	`"query":{"type":"string","minLength":1,"maxLength":2000,"description":"What you want to do, in plain words."},` +
	`"path":{"type":"string","maxLength":1024,"description":"A catalog path to list, e.g. \"/\" or \"/github/issues\"; ids of internal cards are paths."},` +
	`"top_k":{"type":"integer","minimum":1,"maximum":50,"description":"Cards to return (default 10)."},` +
	`"cursor":{"type":"string","maxLength":512,"description":"next_cursor of a previous path browse, for the next page."}}}`)

var hydrateSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["tool_id"],"properties":{` +
	`"tool_id":{"type":"string","minLength":1,"maxLength":256,"description":"The id of a card."}}}`)

var viewSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["handle","selector"],"properties":{` +
	`"handle":{"type":"string","minLength":1,"maxLength":256,"description":"An artifact handle from a tool_execute result."},` +
	`"selector":{"type":"object","description":"What to read, e.g. {\"type\":\"lines\",\"start\":1,\"end\":40} or {\"type\":\"grep\",\"pattern\":\"ERROR\"}."}}}`)

func (r *Runtime) metaTools() []*mcp.Tool {
	browse := &mcp.Tool{Name: ToolBrowse, InputSchema: browseSchema,
		Description: "Find tools. Give a plain-words query, or a path to navigate the catalog from \"/\". Returns short cards; call tool_hydrate for a tool's full schema, tool_execute to run it.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}}
	hydrate := &mcp.Tool{Name: ToolHydrate, InputSchema: hydrateSchema,
		Description: "Get one tool's full definition (description, inputSchema, annotations) by its card id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}}
	// tool_execute's inputSchema is schemas/tool_call.schema.json.
	execute := &mcp.Tool{Name: ToolExecute, InputSchema: r.executeSchema,
		Description: "Run a tool by id with arguments matching its inputSchema. Returns a result envelope; large results come back as artifacts to read with tool_view. Write tools need an idempotency_key."}
	view := &mcp.Tool{Name: ToolView, InputSchema: viewSchema,
		Description: "Read a slice of an artifact returned by tool_execute: head, lines, bytes, json_pointer, json_keys, grep or rows.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}}
	if r.cfg.Mode == config.ModeProxy {
		return []*mcp.Tool{hydrate, execute, view}
	}
	if r.cfg.Mode == config.ModeDirect {
		// Direct mode lists the upstream tools themselves; tool_view reads
		// what the firewall kept out of a large result.
		if !r.cfg.Firewall.Enabled {
			return nil
		}
		return []*mcp.Tool{view}
	}
	return []*mcp.Tool{browse, hydrate, execute, view}
}

// decodeArgs decodes meta-tool arguments strictly: unknown fields, wrong
// types and trailing data are ARGS_INVALID.
func decodeArgs(raw json.RawMessage, v any) *Error {
	if len(raw) > maxMetaArgs {
		return newError(CodeArgsInvalid, "arguments exceed %d bytes", maxMetaArgs)
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return newError(CodeArgsInvalid, "field %q must be %s", te.Field, jsonKind(te.Type.Kind().String())).withPath(te.Field)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return newError(CodeArgsInvalid, "unknown field %q", field).withPath(field)
		default:
			return newError(CodeArgsInvalid, "arguments are not a valid JSON object: %v", err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return newError(CodeArgsInvalid, "unexpected data after the arguments object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "float64":
		return "a number"
	case "map":
		return "an object"
	case "slice":
		return "an array"
	}
	return "of another type"
}

type browseArgs struct {
	Query  *string `json:"query"`
	Path   *string `json:"path"`
	TopK   *int    `json:"top_k"`
	Cursor string  `json:"cursor"`
}

// browseResult is tool_browse's structured content.
type browseResult struct {
	Cards      []choicecard.Card `json:"cards"`
	NextCursor string            `json:"next_cursor,omitempty"`
	Total      int               `json:"total,omitempty"`
	// Upstreams are the upstreams whose tools are missing from the answer
	// because they are still starting or failed.
	Upstreams []upstreamNote `json:"upstreams_not_ready,omitempty"`
	// RequiresCapability lists the ids of the cards whose tools the
	// caller must present a capability token to call (spec 004); a card
	// itself holds the spec's fields only.
	RequiresCapability []string `json:"requires_capability,omitempty"`
	// LowConfidence says no word of the query matched a card as written:
	// the cards are the router's never-empty fallback (closest spellings,
	// stems, synonyms, character trigrams), to be checked before use.
	LowConfidence bool `json:"low_confidence,omitempty"`
}

func (r *Runtime) handleBrowse(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolBrowse, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a browseArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		if e := r.takeMeta(ctx, req.Session, ToolBrowse); e != nil {
			return nil, e
		}
		return r.browse(ctx, req.Session, toolid.KindTool, a)
	})
}

func (r *Runtime) browse(ctx context.Context, ss *mcp.ServerSession, kind toolid.Kind, a browseArgs) (*mcp.CallToolResult, *Error) {
	if (a.Query == nil) == (a.Path == nil) {
		return nil, newError(CodeArgsInvalid, "give exactly one of query or path")
	}
	k := r.cfg.Browse.TopK
	if a.TopK != nil {
		if *a.TopK < 1 || *a.TopK > 50 {
			return nil, newError(CodeArgsInvalid, "top_k must be between 1 and 50").withPath("top_k")
		}
		k = *a.TopK
	}
	st := r.state.Load()
	var res browseResult
	if a.Query != nil {
		if a.Cursor != "" {
			return nil, newError(CodeArgsInvalid, "cursor applies to path browses only").withPath("cursor")
		}
		// The router drops hidden items before it ranks, in its fallback
		// too, so they neither show nor crowd visible ones out.
		var visible router.Visible
		if r.filtering() {
			pinned := r.auth.pin(ctx)
			visible = func(it *catalog.Item) bool { return r.visible(pinned, st, it) }
		}
		cards, low, err := st.router.Route(ctx, kind, *a.Query, k, visible)
		if err != nil {
			return nil, classify(err)
		}
		res.Cards, res.LowConfidence = cards, low
	} else {
		// Paths, counts, descriptions and cursors are computed over what
		// the caller may see (spec 001 MUST 3): a path with nothing
		// visible below it answers like one that does not exist.
		var see func(*catalog.Item) bool
		if r.filtering() {
			pctx := r.auth.pin(ctx)
			see = func(it *catalog.Item) bool { return r.visible(pctx, st, it) }
		}
		page, err := st.router.BrowseFiltered(kind, *a.Path, k, a.Cursor, see)
		if err != nil {
			return nil, classify(err).withPath(*a.Path)
		}
		res.Cards, res.NextCursor, res.Total = page.Cards, page.NextCursor, page.Total
	}
	if r.cfg.Browse.CacheStable {
		res.Cards = r.sessions.get(ss, st.gen).Apply(res.Cards)
	}
	if res.Cards == nil {
		res.Cards = []choicecard.Card{}
	}
	res.RequiresCapability = r.capabilityCards(ctx, st, res.Cards)
	text := choicecard.RenderList(res.Cards)
	if len(res.RequiresCapability) > 0 {
		text += fmt.Sprintf("\n(these need a capability token, see %s: %s)", ToolCapabilityRequest, strings.Join(res.RequiresCapability, ", "))
	}
	if res.LowConfidence && len(res.Cards) > 0 {
		text += "\n(low confidence: no card matched the query's words as written; these are the closest. Try other words or browse a path.)"
	}
	if res.NextCursor != "" {
		text += fmt.Sprintf("\n(%d of %d shown; next_cursor: %s)", len(res.Cards), res.Total, res.NextCursor)
	}
	if res.Upstreams = r.pending(r.auth.policy != nil); len(res.Upstreams) > 0 {
		text += "\n" + pendingText(res.Upstreams)
	}
	return structured(res, text), nil
}

type hydrateArgs struct {
	ToolID string `json:"tool_id"`
}

func (r *Runtime) handleHydrate(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolCall(ctx, ToolHydrate, func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		var a hydrateArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		if e := r.takeMeta(ctx, req.Session, ToolHydrate); e != nil {
			return nil, e
		}
		st := r.state.Load()
		// A tool the caller may not see reads like a missing one; for
		// discovery the incident state hides it too.
		it, e := r.resolveTool(ctx, st, a.ToolID)
		if e == nil && r.hidden(ctx, st, it) {
			e = r.toolNotFound(ctx, st, a.ToolID)
		}
		if e != nil {
			return nil, e
		}
		r.recordItem(ctx, st, it)
		h, err := st.snap.Hydrate(it.ID)
		if err != nil {
			return nil, newError(CodeHydrateFailed, "no tool with id %q in the current catalog", a.ToolID).withCause(err)
		}
		if r.cfg.Browse.CacheStable {
			r.sessions.get(req.Session, st.gen).MarkHydrated(it.ID)
		}
		up := r.upstreamOf(st, it.Server)
		cls := classification{ToolClass: string(guard.ClassUnclassified), TrustLevel: up.trust, Risk: up.risk}
		if reg := st.gate.Registry(); reg != nil {
			cls.RegistryVersion = reg.Version()
			if p, ok := reg.Lookup(it.Server, it.UpstreamName); ok {
				cls.ToolClass, cls.DocumentOp, cls.Destructive = string(p.Class), p.IsDocumentOp, p.Destructive
			}
		}
		if d := r.decide(ctx, st, it, policy.ActionCall); d.RequiresCapability {
			cls.RequiresCapability = true
			cls.CapabilityRequest = &capabilityHint{Method: MethodCapabilitiesRequest, Tool: ToolCapabilityRequest, Tools: []string{it.ID},
				Meta: []string{MetaCapability, MetaCapabilityProof}}
		}
		if m := manifestOf(st, it); m != nil {
			cls.Permissions = m.Permissions
		}
		out := hydrated{Hydration: h, Classification: cls}
		data, _ := json.Marshal(out)
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(data), Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}, nil
	})
}

// lookupTool resolves what a caller names a tool by: its tool_id, or the
// SEP-986 name proxy mode lists it under (catalog.Snapshot.WireName), which
// a client copies from tools/list. The two never overlap: a tool_id has a
// ':', a wire name cannot. Whatever the caller used, the item carries the
// real tool_id into receipts and envelopes.
func lookupTool(st *state, ref string) (*catalog.Item, bool) {
	if it, ok := st.snap.Lookup(ref); ok {
		return it, true
	}
	return st.snap.LookupWire(ref)
}

// structured renders v as structured content with the given text.
func structured(v any, text string) *mcp.CallToolResult {
	data, err := json.Marshal(v)
	if err != nil {
		return errorResult(newError(CodeInternal, "internal gateway error"))
	}
	if text == "" {
		text = string(data)
	}
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(data), Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// capabilityCards lists the cards whose tools need a capability token for
// the caller.
func (r *Runtime) capabilityCards(ctx context.Context, st *state, cards []choicecard.Card) []string {
	if r.auth.policy == nil || !r.auth.policy.Policy().RequiresCapabilities() {
		return nil
	}
	var out []string
	for _, c := range cards {
		if it, ok := st.snap.Lookup(c.ID); ok && it.Kind == toolid.KindTool && r.decide(ctx, st, it, policy.ActionCall).RequiresCapability {
			out = append(out, c.ID)
		}
	}
	return out
}
