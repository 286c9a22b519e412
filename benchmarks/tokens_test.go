package benchmarks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime"
)

var (
	cardsOnce sync.Once
	cardsB    *choicecard.Builder
	cardsErr  error
)

func testCards(t testing.TB) *choicecard.Builder {
	t.Helper()
	cardsOnce.Do(func() { cardsB, cardsErr = choicecard.NewDefaultBuilder() })
	if cardsErr != nil {
		t.Fatal(cardsErr)
	}
	return cardsB
}

func TestWireTexts(t *testing.T) {
	tools := []*mcp.Tool{{Name: "a", Description: "x < y & z", InputSchema: map[string]any{"type": "object"}}}
	got, err := ToolsText(tools)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"description":"x < y & z","inputSchema":{"type":"object"},"name":"a"}]`; got != want {
		t.Errorf("ToolsText = %s, want %s", got, want)
	}
	if got, _ := ToolsText(nil); got != "[]" {
		t.Errorf("ToolsText(nil) = %s", got)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "one"}, &mcp.TextContent{Text: "two"},
		&mcp.ImageContent{Data: []byte("hi"), MIMEType: "image/png"}}}
	if got, want := ResultText(res), "one\ntwo\n"+`{"type":"image","mimeType":"image/png","data":"aGk="}`; got != want {
		t.Errorf("ResultText = %s, want %s", got, want)
	}
	if got, want := CallText("tool_browse", map[string]any{"top_k": 5, "query": "a&b"}), `{"name":"tool_browse","arguments":{"query":"a&b","top_k":5}}`; got != want {
		t.Errorf("CallText = %s, want %s", got, want)
	}
}

// hash8 computes spec 003's hash8 independently of the toolid package.
func hash8(name string, props, required []string) string {
	slices.Sort(props)
	slices.Sort(required)
	b, _ := json.Marshal(map[string][]string{"properties": props, "required": required})
	sum := sha256.Sum256([]byte(name + "\n" + string(b)))
	return hex.EncodeToString(sum[:])[:8]
}

// The baseline and proxy texts of a two-tool catalog, written out by hand:
// the token counts must be those of exactly these texts.
func TestTokenAccountingExact(t *testing.T) {
	cards := testCards(t)
	counter := cards.Counter()
	src, err := catalog.LoadFile("testdata/tokens-tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Baseline: each upstream's own tools/list, as the client decodes it
	// (keys sorted), HTML characters unescaped.
	baseline := `[{"description":"Add two numbers.","inputSchema":{"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"type":"object"},"name":"add"},` +
		`{"description":"Save a note <draft> & more.","inputSchema":{"properties":{"text":{"type":"string"}},"type":"object"},"name":"save_note"}]`
	got, n, err := BaselineTokens(ctx, src, counter)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || got != counter.Count(baseline) {
		t.Fatalf("baseline %d tokens over %d tools, want %d over 2", got, n, counter.Count(baseline))
	}
	// A fixed figure as well, so a change of encoder shows.
	if got != 73 {
		t.Errorf("baseline tokens %d, want 73", got)
	}

	// Proxy: one stripped entry per tool (the tool_id as name, the card's
	// description, a sentinel schema), plus the meta-tools but tool_browse.
	addID := "math:add#" + hash8("add", []string{"a", "b"}, []string{"a", "b"})
	noteID := "notes:save_note#" + hash8("save_note", []string{"text"}, []string{})
	_, gcs, closeGateway, err := startRuntime(ctx, config.ModeGateway, src, cards)
	if err != nil {
		t.Fatal(err)
	}
	defer closeGateway()
	meta, err := listTools(ctx, gcs)
	if err != nil {
		t.Fatal(err)
	}
	metaText, _ := ToolsText(meta)
	var metaNames []string
	var proxyMeta []string
	for _, m := range meta {
		metaNames = append(metaNames, m.Name)
		if m.Name != runtime.ToolBrowse {
			s, _ := marshalPlain(m)
			proxyMeta = append(proxyMeta, s)
		}
	}
	if !slices.Equal(metaNames, []string{"tool_browse", "tool_execute", "tool_hydrate", "tool_view"}) {
		t.Fatalf("gateway lists %v", metaNames)
	}
	proxy := "[" + `{"description":"Add two numbers.","inputSchema":{"type":"object"},"name":"` + addID + `"},` +
		`{"description":"Save a note <draft> & more.","inputSchema":{"type":"object"},"name":"` + noteID + `"},` +
		strings.Join(proxyMeta, ",") + "]"
	_, pcs, closeProxy, err := startRuntime(ctx, config.ModeProxy, src, cards)
	if err != nil {
		t.Fatal(err)
	}
	defer closeProxy()
	proxyTokens, _, err := countTools(ctx, pcs, counter)
	if err != nil {
		t.Fatal(err)
	}
	if proxyTokens != counter.Count(proxy) {
		t.Fatalf("proxy %d tokens, want %d for\n%s", proxyTokens, counter.Count(proxy), proxy)
	}

	// RunTokens: the whole report on this catalog, one query.
	qfile := t.TempDir() + "/q.jsonl"
	writeFileT(t, qfile, `{"source":"t","qid":"q1","query":"add two numbers","server":"math","tool":"add"}`+"\n")
	rep, err := RunTokens(ctx, TokensOptions{Catalog: "testdata/tokens-tools.jsonl", Queries: qfile, Sizes: []int{1, 5}, TopKs: []int{1}, NoFirewall: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 2 || rep.Sizes[0].ToolsRequested != 1 || rep.Sizes[1].ToolsRequested != 2 {
		t.Fatalf("sizes %+v", rep.Sizes)
	}
	whole := rep.Sizes[1]
	if whole.BaselineTokens != got || whole.ProxyTokens != proxyTokens || whole.MetaToolsTokens != counter.Count(metaText) || whole.Tools != 2 || whole.Servers != 2 {
		t.Fatalf("whole catalog %+v", whole)
	}
	// The one browse and hydrate, made by hand.
	browseArgs := map[string]any{"query": "add two numbers", "top_k": 1}
	bres, err := gcs.CallTool(ctx, &mcp.CallToolParams{Name: runtime.ToolBrowse, Arguments: browseArgs})
	if err != nil {
		t.Fatal(err)
	}
	hres, err := gcs.CallTool(ctx, &mcp.CallToolParams{Name: runtime.ToolHydrate, Arguments: map[string]any{"tool_id": addID}})
	if err != nil || hres.IsError {
		t.Fatal(err, ResultText(hres))
	}
	browse, hydrate := counter.Count(ResultText(bres)), counter.Count(ResultText(hres))
	g := whole.Gateway[0]
	if g.BrowseTokens != float64(browse) || g.HydrateTokens != float64(hydrate) || g.GatewayTokens != float64(whole.MetaToolsTokens+browse+hydrate) {
		t.Fatalf("gateway %+v, want browse %d hydrate %d", g, browse, hydrate)
	}
	agent := whole.MetaToolsTokens + browse + hydrate +
		counter.Count(`{"name":"tool_browse","arguments":{"query":"add two numbers","top_k":1}}`) +
		counter.Count(`{"name":"tool_hydrate","arguments":{"tool_id":"`+addID+`"}}`)
	if g.AgentTokensMean != float64(agent) || g.AgentTokensMax != float64(agent) {
		t.Fatalf("agent tokens %v, want %d", g.AgentTokensMean, agent)
	}
	if len(g.Sources) != 1 || g.Sources[0].QIDs != 1 || g.Sources[0].Recall != 1 {
		t.Fatalf("recall %+v", g.Sources)
	}
	wantPct := 100 * float64(agent-counter.Count(`{"name":"tool_browse","arguments":{"query":"add two numbers","top_k":1}}`)-
		counter.Count(`{"name":"tool_hydrate","arguments":{"tool_id":"`+addID+`"}}`)) / float64(got)
	if diff := g.PctOfBaseline - wantPct; diff > 0.001 || diff < -0.001 {
		t.Fatalf("pct of baseline %v, want %v", g.PctOfBaseline, wantPct)
	}
	// The one-tool sample holds one whole server: its gold is there or not.
	small := rep.Sizes[0]
	if small.Tools != 1 || small.Servers != 1 || small.BaselineTokens >= got {
		t.Fatalf("one-tool sample %+v", small)
	}
	// The goal is stated for top_k 5, which this run did not measure.
	if len(rep.Goals) != 1 || rep.Goals[0].Met != nil || rep.Goals[0].Measured != "not measured" {
		t.Fatalf("goals %+v", rep.Goals)
	}
	var b strings.Builder
	if err := WriteTokensTable(&b, rep); err != nil || !strings.Contains(b.String(), "baseline") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := WriteSavingsSVG(&b, rep); err != nil || !strings.HasPrefix(b.String(), "<svg") || !strings.Contains(b.String(), "polyline") {
		t.Fatalf("svg: %v", err)
	}
}

func TestFirewallSavings(t *testing.T) {
	if testing.Short() {
		t.Skip("counts megabytes of tokens")
	}
	out, err := measureFirewall(context.Background(), testCards(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(firewallCases()) {
		t.Fatalf("%d results", len(out))
	}
	for _, f := range out {
		if f.OriginalTokens == 0 || f.InlineTokens == 0 || f.Strategy == "" {
			t.Errorf("%+v", f)
		}
		// Large results are summarised into at most the inline budget plus
		// the envelope around it.
		if f.OriginalTokens > 5000 && (f.Strategy != "summary" || f.InlineTokens > 1200 || f.Artifacts == 0) {
			t.Errorf("large result not firewalled: %+v", f)
		}
	}
	if out[0].Strategy != "inline" {
		t.Errorf("a small result should stay inline: %+v", out[0])
	}
}

func writeFileT(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSampleByServer(t *testing.T) {
	var src catalog.Source
	sizes := map[string]int{"a": 3, "b": 1, "c": 4, "d": 2, "e": 5}
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		for i := range sizes[s] {
			src.Tools = append(src.Tools, catalog.ToolDef{Server: s, Name: fmt.Sprintf("t%d", i)})
		}
	}
	key := func(t catalog.ToolDef) string { return t.Server + "/" + t.Name }
	for seed := range uint64(20) {
		prev := map[string]bool{}
		for n := 0; n <= len(src.Tools)+2; n++ {
			s := SampleByServer(src, n, seed)
			if len(s.Tools) != min(n, len(src.Tools)) {
				t.Fatalf("seed %d n %d: %d tools", seed, n, len(s.Tools))
			}
			// Same seed, same sample; a sample holds every smaller one.
			again := SampleByServer(src, n, seed)
			if !slices.EqualFunc(s.Tools, again.Tools, func(a, b catalog.ToolDef) bool { return key(a) == key(b) }) {
				t.Fatalf("seed %d n %d: not deterministic", seed, n)
			}
			cur := map[string]bool{}
			per := map[string]int{}
			for _, tl := range s.Tools {
				cur[key(tl)] = true
				per[tl.Server]++
			}
			for k := range prev {
				if !cur[k] {
					t.Fatalf("seed %d n %d: lost %s of the smaller sample", seed, n, k)
				}
			}
			prev = cur
			// Whole servers, except at most one partial server.
			partial := 0
			for srv, c := range per {
				if c != sizes[srv] {
					partial++
				}
			}
			if partial > 1 {
				t.Fatalf("seed %d n %d: %d partial servers in %v", seed, n, partial, per)
			}
			// Tools keep their catalog order.
			idx := -1
			for _, tl := range s.Tools {
				j := slices.IndexFunc(src.Tools, func(x catalog.ToolDef) bool { return key(x) == key(tl) })
				if j <= idx {
					t.Fatalf("seed %d n %d: order", seed, n)
				}
				idx = j
			}
		}
	}
	// Different seeds draw different servers first.
	firsts := map[string]bool{}
	for seed := range uint64(20) {
		firsts[SampleByServer(src, 1, seed).Tools[0].Server] = true
	}
	if len(firsts) < 3 {
		t.Fatalf("20 seeds drew first servers %v", firsts)
	}
}

func TestSelfQueries(t *testing.T) {
	src := catalog.Source{Tools: []catalog.ToolDef{
		{Server: "s", Name: "a", Description: "Fetch the weather. Then more."},
		{Server: "s", Name: "b"},
		{Server: "s", Name: "c", Description: strings.Repeat("word ", 40)},
	}}
	qs := SelfQueries(src, 10, 1)
	if len(qs) != 2 {
		t.Fatalf("%d queries", len(qs))
	}
	for _, q := range qs {
		if q.Golds[0].Tool == "a" && q.Text != "Fetch the weather" {
			t.Errorf("query %q", q.Text)
		}
		if q.Golds[0].Tool == "c" && len(strings.Fields(q.Text)) != 30 {
			t.Errorf("query of %d words", len(strings.Fields(q.Text)))
		}
	}
}
