package benchmarks

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/firewall"
	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/toolid"
)

// Go benchmarks of the hot paths not covered by the packages' own (router
// Search, choicecard Build/Render, firewall Apply of large results and
// views): hydrate, argument validation, the firewall's small-result path,
// and whole meta-tool calls through an in-process runtime.
//
//	go test ./benchmarks/ -run XXX -bench . -benchmem

const sharedTools = "../../shared/data/tools.jsonl"

// benchCatalog is the shared catalog when present, else the test catalog.
func benchCatalog(b *testing.B) catalog.Source {
	b.Helper()
	path := sharedTools
	if _, err := os.Stat(path); err != nil {
		path = "testdata/route-tools.jsonl"
	}
	src, err := catalog.LoadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return src
}

func benchSnapshot(b *testing.B) *catalog.Snapshot {
	b.Helper()
	snap, err := IngestSource(benchCatalog(b))
	if err != nil {
		b.Fatal(err)
	}
	return snap
}

func BenchmarkHydrate(b *testing.B) {
	snap := benchSnapshot(b)
	items := snap.Items(toolid.KindTool)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := snap.Hydrate(items[i%len(items)].ID); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// minimalArgs returns arguments satisfying the required properties of a
// schema by their declared type.
func minimalArgs(schema map[string]any) map[string]any {
	args := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	req, _ := schema["required"].([]any)
	for _, r := range req {
		name, _ := r.(string)
		p, _ := props[name].(map[string]any)
		switch p["type"] {
		case "number", "integer":
			args[name] = 1
		case "boolean":
			args[name] = true
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			args[name] = "x"
		}
	}
	return args
}

func BenchmarkValidateArgs(b *testing.B) {
	snap := benchSnapshot(b)
	type pair struct {
		it   *catalog.Item
		args any
	}
	var ps []pair
	for _, it := range snap.Items(toolid.KindTool) {
		if !it.SchemaOK() {
			continue
		}
		// Through JSON, as arguments arrive.
		raw, _ := json.Marshal(minimalArgs(it.InputSchema()))
		var args any
		_ = json.Unmarshal(raw, &args)
		ps = append(ps, pair{it, args})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := ps[i%len(ps)]
		_ = p.it.ValidateArgs(p.args) // a few schemas reject minimal args: the cost is the same
		i++
	}
}

func BenchmarkFirewallApplySmall(b *testing.B) {
	store, err := artifacts.OpenBadger(artifacts.Options{InMemory: true, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	fw := firewall.New(firewall.Options{Store: store, Counter: testCards(b).Counter()})
	res := firewall.Result{Parts: []firewall.Part{{Type: firewall.PartText, Text: "hello",
		Raw: json.RawMessage(`{"type":"text","text":"hello"}`)}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fw.Apply(context.Background(), "bench", res); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCardRenderList(b *testing.B) {
	snap := benchSnapshot(b)
	items := snap.Items(toolid.KindTool)
	cards := make([]choicecard.Card, 0, 10)
	for _, it := range items[:min(10, len(items))] {
		cards = append(cards, it.Card)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = choicecard.RenderList(cards)
	}
}

// runtimeSession serves the benchmark catalog plus an echo tool from an
// in-process runtime, connected in memory.
func runtimeSession(b *testing.B) (*runtime.Runtime, *mcp.ClientSession) {
	b.Helper()
	src := benchCatalog(b)
	src.Tools = append(src.Tools, catalog.ToolDef{Server: "bench", Name: "echo", Description: "Echo the given text back.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)})
	rt, cs, closeFn, err := startRuntime(context.Background(), config.ModeGateway, src, testCards(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeFn)
	return rt, cs
}

func BenchmarkExecuteInMemory(b *testing.B) {
	rt, cs := runtimeSession(b)
	var id string
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		if it.Server == "bench" {
			id = it.ID
		}
	}
	params := &mcp.CallToolParams{Name: runtime.ToolExecute, Arguments: map[string]any{"tool_id": id, "args": map[string]any{"text": "hello"}}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || res.IsError {
			b.Fatal(err, ResultText(res))
		}
	}
}

func BenchmarkBrowseInMemory(b *testing.B) {
	_, cs := runtimeSession(b)
	queries := []string{"list pull requests of a repository", "send a message to a slack channel",
		"get the weather forecast for a city", "query a postgres database", "create a calendar event"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: runtime.ToolBrowse,
			Arguments: map[string]any{"query": queries[i%len(queries)], "top_k": 10}})
		if err != nil || res.IsError {
			b.Fatal(err, ResultText(res))
		}
		i++
	}
}

func BenchmarkHydrateInMemory(b *testing.B) {
	rt, cs := runtimeSession(b)
	items := rt.Snapshot().Items(toolid.KindTool)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: runtime.ToolHydrate,
			Arguments: map[string]any{"tool_id": items[i%len(items)].ID}})
		if err != nil || res.IsError {
			b.Fatal(err, ResultText(res))
		}
		i++
	}
}

// BenchmarkExecuteHTTP is BenchmarkExecuteInMemory over streamable HTTP on
// 127.0.0.1, once per client revision: at 2026-07-28 every call is a
// sessionless request (the go-sdk's stateless handler builds a server
// session per request), at 2025-11-25 it rides one session. cpu-µs/op is
// the CPU time of the whole process (client and runtime) per call, which
// other jobs on the machine move much less than ns/op.
func BenchmarkExecuteHTTP(b *testing.B) {
	rt, _ := runtimeSession(b)
	var id string
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		if it.Server == "bench" {
			id = it.ID
		}
	}
	srv := httptest.NewServer(rt.Handler("/mcp"))
	b.Cleanup(srv.Close)
	params := &mcp.CallToolParams{Name: runtime.ToolExecute, Arguments: map[string]any{"tool_id": id, "args": map[string]any{"text": "hello"}}}
	for _, proto := range []string{"2026-07-28", "2025-11-25"} {
		b.Run(proto, func(b *testing.B) {
			ctx := context.Background()
			cs, err := newClient("bench").Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: proto})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			if sessionless := cs.ID() == ""; sessionless != (proto >= "2026-07-28") {
				b.Fatalf("at %s the client's session id is %q", proto, cs.ID())
			}
			b.ReportAllocs()
			cpu := selfCPU()
			for b.Loop() {
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError {
					b.Fatal(err, ResultText(res))
				}
			}
			b.ReportMetric(float64((selfCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkExecuteUpstreamHTTP calls an upstream's echo through
// tool_execute, all over HTTP on 127.0.0.1, for each pair of client and
// upstream revisions. A go-sdk upstream with sessions negotiates
// 2025-11-25 with quiver (it asks for input mid-call, so a sessionless
// client's call to it is held: run detached, see runtime/protocol.Holds);
// a stateless one 2026-07-28. cpu-µs/op is the whole process's CPU time
// per call (client, quiver and upstream).
func BenchmarkExecuteUpstreamHTTP(b *testing.B) {
	for _, up := range []struct {
		name      string
		stateless bool
	}{{"upstream=2025-11-25", false}, {"upstream=2026-07-28", true}} {
		b.Run(up.name, func(b *testing.B) {
			s := mcp.NewServer(&mcp.Implementation{Name: "fast", Version: "1"}, &mcp.ServerOptions{Logger: discardLogger()})
			mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the given text back."},
				func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
				})
			upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
				&mcp.StreamableHTTPOptions{Stateless: up.stateless}))
			defer upSrv.Close()
			u := config.NewUpstream("fast")
			u.URL = upSrv.URL
			rt, err := runtime.New(benchConfig(config.ModeGateway, benchEnvironment, u), runtime.Deps{Cards: testCards(b), Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close()
			ctx := context.Background()
			if err := rt.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if err := rt.WaitPublished(ctx); err != nil {
				b.Fatal(err)
			}
			var id string
			for _, it := range rt.Snapshot().Items(toolid.KindTool) {
				if it.Server == "fast" && it.UpstreamName == "echo" {
					id = it.ID
				}
			}
			if id == "" {
				b.Fatal("no fast/echo in the catalog")
			}
			srv := httptest.NewServer(rt.Handler("/mcp"))
			defer srv.Close()
			params := &mcp.CallToolParams{Name: runtime.ToolExecute, Arguments: map[string]any{"tool_id": id, "args": map[string]any{"text": "hello"}}}
			for _, proto := range []string{"2026-07-28", "2025-11-25"} {
				b.Run("client="+proto, func(b *testing.B) {
					cs, err := newClient("bench").Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1},
						&mcp.ClientSessionOptions{ProtocolVersion: proto})
					if err != nil {
						b.Fatal(err)
					}
					defer cs.Close()
					b.ReportAllocs()
					cpu := selfCPU()
					for b.Loop() {
						res, err := cs.CallTool(ctx, params)
						if err != nil || res.IsError {
							b.Fatal(err, ResultText(res))
						}
					}
					b.ReportMetric(float64((selfCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
				})
			}
		})
	}
}
