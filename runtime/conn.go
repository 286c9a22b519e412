//lint:file-ignore SA1019 logging is deprecated in protocol 2026-07-28 only; quiver carries the client's log level for the upstreams that still log.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// conn is one upstream as the runtime uses it: a live MCP client or a static
// catalog file. Errors are classified *upstream.Error values.
type conn interface {
	// name is the configured upstream name: the server_id and namespace.
	name() string
	// listing returns the upstream's current tools, resources and prompts,
	// each stamped with the upstream's name as its server.
	listing(ctx context.Context) (catalog.Source, error)
	// The calls take the catalog item they address: its UpstreamName is the
	// original name (or uri) to dispatch with.
	callTool(ctx context.Context, it *catalog.Item, args map[string]any) (*mcp.CallToolResult, error)
	readResource(ctx context.Context, it *catalog.Item) (*mcp.ReadResourceResult, error)
	getPrompt(ctx context.Context, it *catalog.Item, args map[string]string) (*mcp.GetPromptResult, error)
	// templates lists the upstream's resource templates (none for a static
	// catalog).
	templates(ctx context.Context) ([]*mcp.ResourceTemplate, error)
	// complete forwards a completion/complete request.
	complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error)
	// subscribe subscribes to (on) or unsubscribes from a resource's
	// updates on the upstream's shared session.
	subscribe(ctx context.Context, uri string, on bool) error
}

// liveConn adapts a supervised upstream.Client. It holds no Runtime: what
// it needs of one comes as the two hooks below, so it can be built and
// tested on its own.
type liveConn struct {
	c    *upstream.Client
	spec upstream.Spec
	// perClient, when set (sessions: per_client), returns the upstream
	// session of the caller's downstream session, opened from spec on
	// first use; unset, every caller shares c.
	perClient func(ctx context.Context, l liveConn, c *caller) (*upstream.Client, error)
	// relay, when set, registers every call, so that what the upstream
	// sends during it (progress, sampling, elicitation, logs) reaches the
	// caller.
	relay callTracker
	// input, when set, relays the input requests of an upstream at
	// 2026-07-28 to sessionless callers (see relayed); unset, they are
	// answered by the upstream client's own loop.
	input inputRelay
	// levels, when set, returns the log level a downstream session set
	// with logging/setLevel ("" for none).
	levels func(*mcp.ServerSession) mcp.LoggingLevel
	// lower, when set, lowers the level of upstream session uc (one that
	// takes logging/setLevel) to lvl when it is set higher, as a
	// session's logging/setLevel does.
	lower func(ctx context.Context, uc *upstream.Client, lvl mcp.LoggingLevel)
}

// callTracker registers calls in flight with an upstream session; the
// runtime's relay is one (see relay.begin).
type callTracker interface {
	// begin registers a call of tool toolID of server on uc, and returns
	// the call's context, the progress token to send ("" for none) and
	// the function that ends the registration.
	begin(ctx context.Context, uc *upstream.Client, server, toolID string) (context.Context, string, func())
}

// client returns the upstream session to call for the caller in ctx.
func (l liveConn) client(ctx context.Context) (*upstream.Client, error) {
	if l.perClient == nil {
		return l.c, nil
	}
	c := callerOf(ctx)
	if c == nil || c.ss == nil || c.sessionless {
		// A sessionless request has no session to be affine to; its
		// input requests come back as results and need no attribution.
		return l.c, nil
	}
	return l.perClient(ctx, l, c)
}

// begin registers a call with the relay (when there is one); see
// relay.begin.
func (l liveConn) begin(ctx context.Context, uc *upstream.Client, it *catalog.Item) (context.Context, mcp.Meta, func()) {
	if l.relay == nil {
		return ctx, nil, func() {}
	}
	ctx, tok, done := l.relay.begin(ctx, uc, it.Server, it.ID)
	var meta mcp.Meta
	if tok != "" {
		meta = mcp.Meta{"progressToken": tok}
	}
	// A sessionless client's capabilities travel with each of its
	// requests; the upstream sees them instead of quiver's own, so it
	// asks only for input this client can give (the go-sdk client keeps
	// a key already present).
	c := callerOf(ctx)
	if c != nil && c.sessionless && c.capsMeta != nil {
		if meta == nil {
			meta = mcp.Meta{}
		}
		meta[mcp.MetaKeyClientCapabilities] = c.upstreamCaps()
	}
	// The client's log level travels with each call: an upstream at
	// 2026-07-28 has no logging/setLevel and logs only at the level a
	// request's _meta names; an older one ignores the key.
	if lvl := l.levelOf(c); lvl != "" {
		if meta == nil {
			meta = mcp.Meta{}
		}
		meta[mcp.MetaKeyLogLevel] = string(lvl)
		if c.sessionless && l.lower != nil && protocol.AsksMidCall(uc.State().Protocol) {
			// An upstream before 2026-07-28 filters by its session's
			// level; each downstream session filters again by its own
			// (the request's, here).
			l.lower(ctx, uc, lvl)
		}
	}
	return ctx, meta, done
}

// levelOf is the log level of caller c: its request's at 2026-07-28, its
// session's before.
func (l liveConn) levelOf(c *caller) mcp.LoggingLevel {
	switch {
	case c == nil:
		return ""
	case c.sessionless:
		return c.logLevel
	case c.ss != nil && l.levels != nil:
		return l.levels(c.ss)
	}
	return ""
}

func (l liveConn) name() string { return l.c.Name() }

// toolDefs converts the upstream's tools to catalog definitions.
func (l liveConn) toolDefs(tools []*mcp.Tool) ([]catalog.ToolDef, error) {
	server := l.c.Name()
	defs := make([]catalog.ToolDef, 0, len(tools))
	for _, t := range tools {
		def := catalog.ToolDef{Server: server, Name: t.Name, Title: t.Title, Description: t.Description, Meta: t.Meta}
		var err error
		if def.InputSchema, err = rawJSON(t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q input schema: %w", t.Name, err)
		}
		if def.OutputSchema, err = rawJSON(t.OutputSchema); err != nil {
			return nil, fmt.Errorf("tool %q output schema: %w", t.Name, err)
		}
		if t.Annotations != nil {
			var m map[string]any
			if b, err := json.Marshal(t.Annotations); err == nil && json.Unmarshal(b, &m) == nil && len(m) > 0 {
				def.Annotations = m
			}
		}
		defs = append(defs, def)
	}
	return defs, nil
}

func (l liveConn) listing(ctx context.Context) (catalog.Source, error) {
	var src catalog.Source
	tools, err := l.c.ListTools(ctx)
	if err != nil {
		return src, err
	}
	server := l.c.Name()
	if src.Tools, err = l.toolDefs(tools); err != nil {
		return src, err
	}
	resources, err := l.c.ListResources(ctx)
	if err != nil {
		return src, err
	}
	for _, r := range resources {
		def := catalog.ResourceDef{Server: server, URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType, Size: r.Size, Meta: r.Meta}
		src.Resources = append(src.Resources, def)
	}
	prompts, err := l.c.ListPrompts(ctx)
	if err != nil {
		return src, err
	}
	for _, p := range prompts {
		def := catalog.PromptDef{Server: server, Name: p.Name, Title: p.Title, Description: p.Description, Meta: p.Meta}
		for _, a := range p.Arguments {
			def.Arguments = append(def.Arguments, catalog.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
		src.Prompts = append(src.Prompts, def)
	}
	return src, nil
}

// asksMidCall reports whether upstream session uc asks for input in the
// middle of a call (protocol 2025-11-25 or older), so that a sessionless
// caller's call to it is held (see relayed).
func asksMidCall(uc *upstream.Client) func() bool {
	return func() bool { return protocol.AsksMidCall(uc.State().Protocol) }
}

func (l liveConn) callTool(ctx context.Context, it *catalog.Item, args map[string]any) (*mcp.CallToolResult, error) {
	uc, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	return relayed(ctx, l.input, asksMidCall(uc), it.Server, it.ID, it.ID, args, toolShape,
		func(ctx context.Context, answers mcp.InputResponseMap, upState string) (*mcp.CallToolResult, error) {
			ctx, meta, done := l.begin(ctx, uc, it)
			defer done()
			res, err := uc.CallToolParams(ctx, &mcp.CallToolParams{Name: it.UpstreamName, Arguments: args, Meta: meta,
				InputResponses: answers, RequestState: upState})
			if err != nil {
				return nil, err
			}
			return upstreamTask(ctx, uc, res)
		})
}

func (l liveConn) readResource(ctx context.Context, it *catalog.Item) (*mcp.ReadResourceResult, error) {
	uc, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	// A template's URIs share its item: the URI is part of the target.
	return relayed(ctx, l.input, asksMidCall(uc), it.Server, it.ID, it.ID+"\n"+it.UpstreamName, nil, resourceShape,
		func(ctx context.Context, answers mcp.InputResponseMap, upState string) (*mcp.ReadResourceResult, error) {
			ctx, meta, done := l.begin(ctx, uc, it)
			defer done()
			return uc.ReadResourceParams(ctx, &mcp.ReadResourceParams{URI: it.UpstreamName, Meta: meta,
				InputResponses: answers, RequestState: upState})
		})
}

func (l liveConn) getPrompt(ctx context.Context, it *catalog.Item, args map[string]string) (*mcp.GetPromptResult, error) {
	uc, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	return relayed(ctx, l.input, asksMidCall(uc), it.Server, it.ID, it.ID, args, promptShape,
		func(ctx context.Context, answers mcp.InputResponseMap, upState string) (*mcp.GetPromptResult, error) {
			ctx, meta, done := l.begin(ctx, uc, it)
			defer done()
			return uc.GetPromptParams(ctx, &mcp.GetPromptParams{Name: it.UpstreamName, Arguments: args, Meta: meta,
				InputResponses: answers, RequestState: upState})
		})
}

func (l liveConn) templates(ctx context.Context) ([]*mcp.ResourceTemplate, error) {
	return l.c.ListResourceTemplates(ctx)
}

func (l liveConn) complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	uc, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	return uc.Complete(ctx, p)
}

func (l liveConn) subscribe(ctx context.Context, uri string, on bool) error {
	if on {
		return l.c.Subscribe(ctx, uri)
	}
	return l.c.Unsubscribe(ctx, uri)
}

func rawJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	return b, nil
}

// staticConn serves a catalog file: its listings, and canned results. A
// tool whose record carries no canned result answers with its arguments
// echoed, which makes a static catalog a working fleet for tests and demos.
type staticConn struct {
	upstreamName string
	src          catalog.Source
	tools        map[string]*catalog.ToolDef
	resources    map[string]*catalog.ResourceDef
	prompts      map[string]*catalog.PromptDef
}

func newStaticConn(name string, src catalog.Source) *staticConn {
	s := &staticConn{upstreamName: name, tools: map[string]*catalog.ToolDef{}, resources: map[string]*catalog.ResourceDef{}, prompts: map[string]*catalog.PromptDef{}}
	// A static file may hold tools of many servers (the shared catalogs
	// do); they keep their own server names so ids stay those of the file.
	stamp := func(server string) string {
		if server == "" {
			return name
		}
		return server
	}
	for _, t := range src.Tools {
		t.Server = stamp(t.Server)
		s.src.Tools = append(s.src.Tools, t)
	}
	for _, r := range src.Resources {
		r.Server = stamp(r.Server)
		s.src.Resources = append(s.src.Resources, r)
	}
	for _, p := range src.Prompts {
		p.Server = stamp(p.Server)
		s.src.Prompts = append(s.src.Prompts, p)
	}
	for i := range s.src.Tools {
		t := &s.src.Tools[i]
		if _, dup := s.tools[staticKey(t.Server, t.Name)]; !dup {
			s.tools[staticKey(t.Server, t.Name)] = t
		}
	}
	for i := range s.src.Resources {
		r := &s.src.Resources[i]
		s.resources[staticKey(r.Server, r.URI)] = r
	}
	for i := range s.src.Prompts {
		p := &s.src.Prompts[i]
		s.prompts[staticKey(p.Server, p.Name)] = p
	}
	return s
}

func staticKey(server, name string) string { return server + "\x00" + name }

func (s *staticConn) name() string { return s.upstreamName }

func (s *staticConn) listing(context.Context) (catalog.Source, error) { return s.src, nil }

func (s *staticConn) callTool(_ context.Context, it *catalog.Item, args map[string]any) (*mcp.CallToolResult, error) {
	t, ok := s.tools[staticKey(it.Server, it.UpstreamName)]
	if !ok {
		return nil, &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("unknown tool")}
	}
	if len(t.Result) > 0 {
		var res mcp.CallToolResult
		if err := json.Unmarshal(t.Result, &res); err == nil && (len(res.Content) > 0 || res.StructuredContent != nil) {
			return &res, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(t.Result)}}}, nil
	}
	echo, err := json.Marshal(args)
	if err != nil {
		return nil, &upstream.Error{Code: CodeUpstreamError, Err: err}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(echo)}}, StructuredContent: json.RawMessage(echo)}, nil
}

func (s *staticConn) templates(context.Context) ([]*mcp.ResourceTemplate, error) { return nil, nil }

func (s *staticConn) complete(context.Context, *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
}

func (s *staticConn) subscribe(context.Context, string, bool) error {
	return &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("a static catalog's resources do not change")}
}

func (s *staticConn) readResource(_ context.Context, it *catalog.Item) (*mcp.ReadResourceResult, error) {
	r, ok := s.resources[staticKey(it.Server, it.UpstreamName)]
	if !ok {
		return nil, &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("unknown resource")}
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.URI, MIMEType: r.MIMEType, Text: r.Text}}}, nil
}

func (s *staticConn) getPrompt(_ context.Context, it *catalog.Item, args map[string]string) (*mcp.GetPromptResult, error) {
	p, ok := s.prompts[staticKey(it.Server, it.UpstreamName)]
	if !ok {
		return nil, &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("unknown prompt")}
	}
	res := &mcp.GetPromptResult{Description: p.Description}
	if len(p.Messages) > 0 {
		if err := json.Unmarshal(p.Messages, &res.Messages); err != nil {
			return nil, &upstream.Error{Code: CodeUpstreamError, Err: fmt.Errorf("canned messages: %w", err)}
		}
		return res, nil
	}
	text, _ := json.Marshal(args)
	res.Messages = []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: p.Name + " " + string(text)}}}
	return res, nil
}
