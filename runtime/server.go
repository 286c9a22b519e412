package runtime

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/quiver-mcp/quiver/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/quiver-mcp/quiver/toolid"
)

// strippedSchema is the sentinel input schema of proxy-mode entries (spec
// 003 §4.1): discovery only, no properties.
var strippedSchema = json.RawMessage(`{"type":"object"}`)

func (r *Runtime) newServer() *mcp.Server {
	so := &mcp.ServerOptions{
		Logger:       r.log,
		Instructions: r.instructions(),
		Capabilities: &mcp.ServerCapabilities{
			Tools: &mcp.ToolCapabilities{ListChanged: true},
			//lint:ignore SA1019 deprecated in protocol 2026-07-28 only; quiver forwards logging for the protocols that have it.
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
			// quiver relays the tasks of upstreams that offer them to
			// the clients that declare the extension (tasks.go, whose
			// taskCapability withholds it while no upstream does).
			Extensions: map[string]any{protocol.TasksExtension: map[string]any{}},
		},
		CompletionHandler: r.handleComplete,
		// Every revision the go-sdk speaks, chosen per client: sessions
		// up to 2025-11-25, sessionless requests (over HTTP through the
		// router in Handler) at 2026-07-28, whose input requests quiver
		// relays as multi-round-trip results (mrtr.go).
		SupportedProtocolVersions: mcp.SupportedProtocolVersions(),
		SetCacheable:              protocol.Cacheable(protocol.CacheOptions{Stable: r.stableAnswer, Settled: r.settled, Private: r.filtering}),
	}
	if r.listsPrimitives() {
		so.Capabilities.Prompts = &mcp.PromptCapabilities{ListChanged: true}
		so.Capabilities.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true}
		so.SubscribeHandler = r.handleSubscribe
		so.UnsubscribeHandler = r.handleUnsubscribe
	} else {
		// A gateway declares both so that every client may ask for the
		// lists (the 2026-07-28 suite asks every server, and an undeclared
		// feature must answer -32601): they are empty, since its
		// resources and prompts are found with resource_browse and
		// prompt_browse, and they change only with the configuration.
		so.Capabilities.Prompts = &mcp.PromptCapabilities{}
		so.Capabilities.Resources = &mcp.ResourceCapabilities{}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "quiver", Title: "quiver MCP gateway", Version: r.deps.Version}, so)
	s.AddReceivingMiddleware(r.rec.receive, protocol.DeclaredOnly(func() *mcp.ServerCapabilities { return so.Capabilities }),
		r.awaitCatalog, r.listFilter, r.passthrough, r.taskCapability)
	s.AddSendingMiddleware(elicitSchema)
	for _, t := range r.metaTools() {
		switch t.Name {
		case ToolBrowse:
			s.AddTool(t, r.handleBrowse)
		case ToolHydrate:
			s.AddTool(t, r.handleHydrate)
		case ToolExecute:
			s.AddTool(t, r.handleExecute)
		case ToolView:
			s.AddTool(t, r.handleView)
		}
	}
	if err := r.registerTaskMethods(s); err != nil {
		panic(err)
	}
	if err := r.registerCapabilityMethods(s); err != nil {
		// Only a name that shadows a standard method fails, which these
		// do not.
		panic(err)
	}
	r.server = s
	r.syncCapabilityTools()
	return s
}

func (r *Runtime) instructions() string {
	if r.cfg.Mode == config.ModeDirect {
		return "Every upstream tool, prompt and resource is listed under its own name (prefixed by its upstream's tool_prefix). Large tool results come back as artifacts to read with tool_view."
	}
	if r.cfg.Mode == config.ModeProxy {
		return "Every upstream tool is listed by id with a short description. Call tool_hydrate(tool_id) for its schema and tool_execute(tool_id, args) to run it; listed entries cannot be called directly (tools listed with a full inputSchema can). Prompts and resources are listed and read as usual."
	}
	return "Tools are behind tool_browse: search with a plain-words query (or navigate paths from \"/\"), then tool_hydrate a card id for its schema and tool_execute it."
}

// afterSwap updates what depends on the served catalog: proxy mode's listed
// entries (the go-sdk announces tools/list_changed to every session), and
// the per-session cache-stable state, which belongs to one catalog.
func (r *Runtime) afterSwap(old, next *state) {
	r.syncExposure(old, next)
	if r.cfg.Mode != config.ModeDirect {
		r.syncPrimitiveVerbs(old, next)
	}
	defer r.reannounce(next)
	if r.cfg.Mode != config.ModeProxy {
		return
	}
	// Entries are listed under their wire names (SEP-986's characters; a
	// tool_id's ':' and '#' are outside them): a name that no longer
	// stands for a tool goes, a new name or a changed description is
	// (re)added, and AddTool replaces a name that now stands for another
	// tool (a collision suffix that moved).
	// A tool listed directly (expose.direct) is listed under its exposed
	// name instead (syncExposure did that).
	oldStripped, nextStripped := stripped(old), stripped(next)
	var gone []string
	for w := range oldStripped {
		if _, ok := nextStripped[w]; !ok && next.exp.tools[w] == "" {
			gone = append(gone, w)
		}
	}
	if len(gone) > 0 {
		r.server.RemoveTools(gone...)
	}
	for _, w := range sortedKeys(nextStripped) {
		it := nextStripped[w]
		if prev, ok := oldStripped[w]; ok && prev.ID == it.ID && prev.Card.Description == it.Card.Description {
			continue
		}
		tool := &mcp.Tool{Name: w, Description: it.Card.Description, InputSchema: strippedSchema}
		r.server.AddTool(tool, r.handleStripped)
	}
}

// stripped maps the names of proxy mode's stripped entries of st to their
// tools: every tool of the catalog not listed directly.
func stripped(st *state) map[string]*catalog.Item {
	direct := make(map[string]bool, len(st.exp.tools))
	for _, id := range st.exp.tools {
		direct[id] = true
	}
	out := map[string]*catalog.Item{}
	for _, it := range st.snap.Items(toolid.KindTool) {
		if direct[it.ID] {
			continue
		}
		w, _ := st.snap.WireName(it.ID)
		out[w] = it
	}
	return out
}

// reannounce passes on an upstream's list_changed when the rebuild it
// caused left quiver's own list as it was (an upstream that registers a
// tool again, say): listeners are told the list changed, as the upstream
// told quiver. The go-sdk notifies on every registration, coalescing a
// burst into one notification, so registering one listed entry again is
// the announcement. The gateway's own list (its meta-tools) does not
// follow the upstreams'.
func (r *Runtime) reannounce(next *state) {
	r.mu.Lock()
	heard := r.heard
	r.heard = nil
	r.mu.Unlock()
	if heard[upstream.KindTools] {
		done := false
		if r.cfg.Mode == config.ModeProxy {
			entries := stripped(next)
			if names := sortedKeys(entries); len(names) > 0 {
				r.server.AddTool(&mcp.Tool{Name: names[0], Description: entries[names[0]].Card.Description, InputSchema: strippedSchema}, r.handleStripped)
				done = true
			}
		}
		if !done {
			for _, name := range sortedKeys(next.exp.tools) {
				it, ok := next.snap.Lookup(next.exp.tools[name])
				if !ok {
					continue
				}
				if t, err := directTool(name, it); err == nil && guarded(func() { r.server.AddTool(t, r.handleDirect) }) == nil {
					break
				}
			}
		}
	}
	if !r.exposes() {
		return
	}
	if heard[upstream.KindPrompts] {
		for _, name := range sortedKeys(next.exp.prompts) {
			if it, ok := next.snap.Lookup(next.exp.prompts[name]); ok && guarded(func() { r.server.AddPrompt(directPrompt(name, it), r.handleDirectPrompt) }) == nil {
				break
			}
		}
	}
	if heard[upstream.KindResources] {
		for _, uri := range sortedKeys(next.exp.resources) {
			it, ok := next.snap.Lookup(next.exp.resources[uri])
			if !ok {
				continue
			}
			d := it.Resource
			res := &mcp.Resource{URI: d.URI, Name: d.Name, Title: d.Title, Description: d.Description, MIMEType: d.MIMEType, Size: d.Size, Meta: d.Meta}
			if guarded(func() { r.server.AddResource(res, r.handleDirectResource) }) == nil {
				break
			}
		}
	}
}

// handleStripped answers a direct call of a proxy-mode entry: discovery
// entries are not callable (spec 003 §4.1). The refusal names the tool_id
// and the listed name, either of which tool_execute takes.
func (r *Runtime) handleStripped(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := req.Params.Name
	st := r.state.Load()
	it, ok := st.snap.LookupWire(name)
	callerOf(ctx).name("stripped")
	if !ok || r.concealed(ctx, st, it) {
		return nil, unknownTool(name)
	}
	return toolCall(ctx, "stripped", func(ctx context.Context) (*mcp.CallToolResult, *Error) {
		return nil, newError(CodeArgsInvalid, "listed entries are for discovery; call tool_execute with tool_id %q (or its listed name %q)", it.ID, name).
			withPath("name").withDetail("tool_id", it.ID).withDetail("name", name)
	})
}

// maxSessions bounds the per-session browse state kept at once; the oldest
// session's state is dropped first.
const maxSessions = 4096

// sessionStates holds each session's cache-stable browse view.
type sessionStates struct {
	mu    sync.Mutex
	views map[*mcp.ServerSession]*sessionView
	order []*mcp.ServerSession
}

type sessionView struct {
	gen  uint64
	view *router.StableView
}

func (s *sessionStates) init() { s.views = map[*mcp.ServerSession]*sessionView{} }

// get returns the session's view for catalog generation gen; a view from
// an older catalog is discarded, since its frozen cards may name tools that
// no longer exist.
func (s *sessionStates) get(ss *mcp.ServerSession, gen uint64) *router.StableView {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.views[ss]; ok && v.gen == gen {
		return v.view
	}
	if _, ok := s.views[ss]; !ok {
		s.order = append(s.order, ss)
		if len(s.order) > maxSessions {
			delete(s.views, s.order[0])
			s.order = s.order[1:]
		}
	}
	v := &sessionView{gen: gen, view: router.NewStableView(0)}
	s.views[ss] = v
	return v.view
}

// stableAnswer reports whether an answer changes only with quiver's
// configuration: server/discover, and gateway mode's tools/list (the
// meta-tools) and its prompt and resource lists (empty). Everything else
// follows the fleet.
func (r *Runtime) stableAnswer(req mcp.Request) bool {
	switch req.(type) {
	case *mcp.DiscoverRequest:
		return true
	case *mcp.ListToolsRequest:
		return r.cfg.Mode == config.ModeGateway && len(r.cfg.Expose.Direct) == 0 && !r.policyListsTools()
	case *mcp.ListPromptsRequest, *mcp.ListResourcesRequest, *mcp.ListResourceTemplatesRequest:
		return !r.listsPrimitives()
	}
	return false
}

// settled reports whether every live upstream is ready: until then a
// listing may change at any moment.
func (r *Runtime) settled() bool {
	select {
	case <-r.start.published:
	default:
		return false
	}
	for _, c := range r.clients() {
		if c.State().Status != upstream.StatusReady {
			return false
		}
	}
	return true
}
