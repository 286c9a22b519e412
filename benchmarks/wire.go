package benchmarks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
)

// This file defines what "the tokens an MCP client puts in the prompt" are,
// for every figure of the token benchmark:
//
//   - a tools/list answer: the JSON array of the tool objects exactly as the
//     go-sdk client decoded them (name, title, description, inputSchema,
//     outputSchema, annotations, _meta; fields the client does not know are
//     dropped, object keys come out sorted), compact, without HTML escaping
//     (ToolsText);
//   - a tools/call answer: the text of its content items, one after the
//     other separated by a line break, and the JSON of any non-text item
//     (ResultText); that is what MCP clients hand the model as the tool
//     result;
//   - a tools/call request: {"name": ..., "arguments": ...} as the model
//     writes it (CallText).

// marshalPlain is json.Marshal without HTML escaping: clients written in
// other languages send "<" and "&" as they are, and the escaped forms cost
// more tokens.
func marshalPlain(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// ToolsText returns the prompt text of a tools/list answer: the JSON array
// of the listed tools.
func ToolsText(tools []*mcp.Tool) (string, error) {
	if tools == nil {
		tools = []*mcp.Tool{}
	}
	s, err := marshalPlain(tools)
	if err != nil {
		return "", fmt.Errorf("marshal tools: %w", err)
	}
	return s, nil
}

// ResultText returns the prompt text of a tools/call answer: its text
// content items separated by line breaks; any other content item counts as
// its JSON.
func ResultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
			continue
		}
		s, err := marshalPlain(c)
		if err != nil {
			continue
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n")
}

// CallText returns the prompt text of a tools/call request as the model
// writes it: {"name": name, "arguments": args}.
func CallText(name string, args any) string {
	s, err := marshalPlain(struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	}{name, args})
	if err != nil {
		return ""
	}
	return s
}

// benchEnvironment is the environment of the benchmark's runtimes. The
// catalogs and test upstreams come without tool_registry manifests, so
// their tools are unclassified, which prod denies: the runtimes run in dev,
// where unclassified tools are allowed (with a log line, discarded here).
const benchEnvironment = guard.EnvDev

// listTools lists every tool of a session, following pagination.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// connectInMemory connects a go-sdk client to server over in-memory
// transports. close ends both sessions.
func connectInMemory(ctx context.Context, server *mcp.Server) (cs *mcp.ClientSession, closeFn func(), err error) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("server connect: %w", err)
	}
	cs, err = newClient("quiver-bench").Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, nil, fmt.Errorf("client connect: %w", err)
	}
	return cs, func() { cs.Close(); ss.Close() }, nil
}

func newClient(name string) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
}

// discardLogger drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// upstreamServers returns one go-sdk server per server of src, listing that
// server's tools as the upstream itself would (the first of duplicate
// names wins, as at catalog ingest). These are the servers an agent
// connected to the whole fleet directly would list.
func upstreamServers(src catalog.Source) ([]*mcp.Server, error) {
	var order []string
	byServer := map[string][]catalog.ToolDef{}
	for _, t := range src.Tools {
		if _, ok := byServer[t.Server]; !ok {
			order = append(order, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], t)
	}
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	out := make([]*mcp.Server, 0, len(order))
	for _, name := range order {
		s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{Logger: discardLogger()})
		seen := map[string]bool{}
		for _, t := range byServer[name] {
			if seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			tool, err := mcpTool(t)
			if err != nil {
				return nil, fmt.Errorf("server %q tool %q: %w", name, t.Name, err)
			}
			s.AddTool(tool, noop)
		}
		out = append(out, s)
	}
	return out, nil
}

// mcpTool converts a catalog definition into the go-sdk tool an upstream
// would register. A tool whose input schema is not an object schema gets
// {"type":"object"} (the go-sdk refuses anything else), and so is counted
// smaller than it is.
func mcpTool(t catalog.ToolDef) (*mcp.Tool, error) {
	tool := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, Meta: t.Meta}
	tool.InputSchema = json.RawMessage(`{"type":"object"}`)
	if len(t.InputSchema) > 0 {
		var m map[string]any
		if json.Unmarshal(t.InputSchema, &m) == nil && m["type"] == "object" {
			tool.InputSchema = t.InputSchema
		}
	}
	if len(t.OutputSchema) > 0 {
		var m map[string]any
		if json.Unmarshal(t.OutputSchema, &m) == nil {
			tool.OutputSchema = t.OutputSchema
		}
	}
	if len(t.Annotations) > 0 {
		b, err := json.Marshal(t.Annotations)
		if err != nil {
			return nil, fmt.Errorf("annotations: %w", err)
		}
		var a mcp.ToolAnnotations
		if err := json.Unmarshal(b, &a); err == nil {
			tool.Annotations = &a
		}
	}
	return tool, nil
}

// benchConfig is the configuration of a benchmark's runtime: the defaults
// in mode and env, with ups and no state directory (artifacts, receipts
// and approvals in memory, nothing written under the home directory).
func benchConfig(mode config.Mode, env guard.Environment, ups ...config.Upstream) *config.Config {
	cfg := config.Default()
	cfg.Mode, cfg.Environment, cfg.StateDir, cfg.Upstreams = mode, env, "", ups
	return cfg
}
