package benchmarks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/choicecard/tokens"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/toolid"
)

// DefaultSizes returns the catalog sizes of the savings curve: 50, 100,
// 500, 1,000 and 3,641 tools.
func DefaultSizes() []int { return []int{50, 100, 500, 1000, 3641} }

// TokensOptions configure RunTokens.
type TokensOptions struct {
	// Catalog is the catalog file (see catalog.LoadFile).
	Catalog string
	// Queries is a labelled query file (see LoadQueries); empty means
	// SelfQueries queries made from the catalog's own descriptions.
	Queries string
	// Sizes are the catalog sizes of the curve, in tools of the file
	// (before ingest drops duplicates); a size above the catalog's is
	// capped to it. Empty means DefaultSizes.
	Sizes []int
	// Seed seeds the by-server sampling (and self queries).
	Seed uint64
	// TopKs are the browse sizes measured; empty means 5 and 10.
	TopKs []int
	// SelfQueries is how many self queries to make without a query file
	// (default 200).
	SelfQueries int
	// NoFirewall skips the firewall savings section.
	NoFirewall bool
	// Progress, when set, receives one line per step.
	Progress io.Writer
}

// TokensReport is the outcome of RunTokens.
type TokensReport struct {
	// Catalog and Queries name the inputs (Queries says "self" for
	// queries made from the catalog), Encoding the token encoding, Seed
	// the sampling seed.
	Catalog  string `json:"catalog"`
	Queries  string `json:"queries"`
	Encoding string `json:"encoding"`
	Seed     uint64 `json:"seed"`
	// Sizes holds one entry per catalog size, smallest first; the last is
	// the whole catalog.
	Sizes []SizeTokens `json:"sizes"`
	// Firewall holds the firewall's savings on large results.
	Firewall []FirewallSaving `json:"firewall,omitempty"`
	// Goals are the targets and whether this run met them.
	Goals []Goal `json:"goals"`
	// Machine is where the run happened, Seconds how long it took.
	Machine Machine `json:"machine"`
	Seconds float64 `json:"elapsed_s"`
}

// SizeTokens are the token figures of one catalog size.
type SizeTokens struct {
	// ToolsRequested is the sample size in tools of the file; Tools and
	// Servers are what the runtime served after ingest.
	ToolsRequested int `json:"tools_requested"`
	Tools          int `json:"tools"`
	Servers        int `json:"servers"`
	// BaselineTokens is the tools/list of every tool, listed by each
	// upstream itself.
	BaselineTokens int `json:"baseline_tokens"`
	// MetaToolsTokens is the gateway's tools/list (the meta-tools).
	MetaToolsTokens int `json:"meta_tools_tokens"`
	// ProxyTokens is proxy mode's tools/list: one stripped entry per tool
	// plus tool_hydrate, tool_execute and tool_view.
	ProxyTokens       int     `json:"proxy_tokens"`
	ProxyReductionPct float64 `json:"proxy_reduction_pct"`
	// Gateway holds one entry per browse size.
	Gateway []GatewayTokens `json:"gateway"`
}

// GatewayTokens are the gateway-mode figures for one browse size.
type GatewayTokens struct {
	TopK int `json:"top_k"`
	// Queries is the number of browses made (one per labelled qid).
	Queries int `json:"queries"`
	// BrowseTokens and HydrateTokens are the mean answers of tool_browse
	// and tool_hydrate.
	BrowseTokens  float64 `json:"browse_tokens"`
	HydrateTokens float64 `json:"hydrate_tokens"`
	// GatewayTokens = MetaToolsTokens + BrowseTokens + HydrateTokens: the
	// meta-tool definitions plus one browse and one hydrate answer.
	GatewayTokens float64 `json:"gateway_tokens"`
	// ReductionPct is 100 * (1 - GatewayTokens / BaselineTokens), and
	// PctOfBaseline 100 * GatewayTokens / BaselineTokens.
	ReductionPct  float64 `json:"reduction_pct"`
	PctOfBaseline float64 `json:"pct_of_baseline"`
	// Agent* are, per query, the tokens an agent spends to reach its gold
	// tools: the meta-tool definitions, the browse request and answer, and
	// a hydrate request and answer for every gold tool found (or for the
	// first card when none is).
	AgentTokensMean float64 `json:"agent_tokens_mean"`
	AgentTokensP50  float64 `json:"agent_tokens_p50"`
	AgentTokensP95  float64 `json:"agent_tokens_p95"`
	AgentTokensMax  float64 `json:"agent_tokens_max"`
	// Sources are recall@TopK per query source, over the qids with at
	// least one gold tool in the sampled catalog.
	Sources []SourceRecall `json:"sources"`
}

// SourceRecall is recall@k of one query source through the runtime's
// tool_browse.
type SourceRecall struct {
	// Source is the query source, K the browse size, QIDs the qids
	// scored, Recall recall@K.
	Source string
	K      int
	QIDs   int
	Recall float64
	// AgentTokensMean is the mean agent cost of this source's queries.
	AgentTokensMean float64
}

// MarshalJSON writes {"source","qids","recall@K","agent_tokens_mean"}.
func (s SourceRecall) MarshalJSON() ([]byte, error) {
	var o object
	o.put("source", s.Source)
	o.put("qids", s.QIDs)
	o.put(fmt.Sprintf("recall@%d", s.K), s.Recall)
	o.put("agent_tokens_mean", s.AgentTokensMean)
	return o.bytes(), nil
}

// FirewallSaving is what the firewall did to one large result.
type FirewallSaving struct {
	// Name says what the result is.
	Name string `json:"name"`
	// OriginalBytes and OriginalTokens measure the upstream's result as a
	// direct call puts it in the prompt (exact cl100k_base count).
	OriginalBytes  int `json:"original_bytes"`
	OriginalTokens int `json:"original_tokens"`
	// InlineTokens is the tool_execute answer through quiver (the
	// envelope: summary, facts, artifacts, views, provenance, ...).
	InlineTokens int     `json:"inline_tokens"`
	ReductionPct float64 `json:"reduction_pct"`
	// Strategy, FirewallOriginalTokens and FirewallInlineTokens are the
	// envelope's own firewall report (the firewall estimates the original
	// count of a large result from samples).
	Strategy               string `json:"strategy"`
	FirewallOriginalTokens int    `json:"firewall_original_tokens"`
	FirewallInlineTokens   int    `json:"firewall_inline_tokens"`
	Artifacts              int    `json:"artifacts"`
}

// RunTokens measures the context cost of the gateway, proxy and baseline
// surfaces over samples of a catalog, through a real in-process runtime
// driven by a go-sdk client, and the firewall's savings on large results.
func RunTokens(ctx context.Context, opts TokensOptions) (*TokensReport, error) {
	start := time.Now()
	progress := progressFunc(opts.Progress)
	ks := slices.Clone(opts.TopKs)
	if len(ks) == 0 {
		ks = []int{5, 10}
	}
	slices.Sort(ks)
	ks = slices.Compact(ks)
	for _, k := range ks {
		if k < 1 || k > router.MaxTopK {
			return nil, fmt.Errorf("top_k %d out of range 1..%d", k, router.MaxTopK)
		}
	}
	src, err := loadSource(opts.Catalog)
	if err != nil {
		return nil, err
	}
	if len(src.Tools) == 0 {
		return nil, errors.New("the catalog has no tools")
	}
	var qs []Query
	queries := opts.Queries
	if queries != "" {
		if qs, err = LoadQueries(queries); err != nil {
			return nil, err
		}
	} else {
		n := opts.SelfQueries
		if n <= 0 {
			n = 200
		}
		qs = SelfQueries(src, n, opts.Seed)
		queries = fmt.Sprintf("self (%d descriptions of the catalog)", len(qs))
	}
	sizes := opts.Sizes
	if len(sizes) == 0 {
		sizes = DefaultSizes()
	}
	sizes = slices.Clone(sizes)
	for i, n := range sizes {
		if n < 1 {
			return nil, fmt.Errorf("size %d: want 1 or more", n)
		}
		sizes[i] = min(n, len(src.Tools))
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)

	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		return nil, fmt.Errorf("card builder: %w", err)
	}
	rep := &TokensReport{Catalog: opts.Catalog, Queries: queries, Encoding: tokens.EncodingName, Seed: opts.Seed, Machine: ThisMachine()}
	for _, n := range sizes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sample := SampleByServer(src, n, opts.Seed)
		progress("size %d: measuring baseline, proxy and gateway (%d queries x top_k %v)", n, len(qs), ks)
		st, err := measureSize(ctx, sample, qs, ks, cards)
		if err != nil {
			return nil, fmt.Errorf("size %d: %w", n, err)
		}
		st.ToolsRequested = n
		rep.Sizes = append(rep.Sizes, st)
		progress("size %d: %d tools, baseline %d tokens, proxy %d, gateway@%d %.0f (%.2f%% of baseline)",
			n, st.Tools, st.BaselineTokens, st.ProxyTokens, st.Gateway[0].TopK, st.Gateway[0].GatewayTokens, st.Gateway[0].PctOfBaseline)
	}
	if !opts.NoFirewall {
		progress("firewall: large results through tool_execute")
		if rep.Firewall, err = measureFirewall(ctx, cards); err != nil {
			return nil, err
		}
	}
	rep.Goals = TokensGoals(rep)
	rep.Seconds = round(time.Since(start).Seconds(), 1)
	return rep, nil
}

func progressFunc(w io.Writer) func(string, ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}

// SelfQueries makes n labelled queries from a catalog itself, for catalogs
// without a query file: the first sentence (at most 30 words) of the
// description of n tools drawn with a seeded generator, each labelled with
// its own tool. Tools without a description are skipped.
func SelfQueries(src catalog.Source, n int, seed uint64) []Query {
	idx := make([]int, 0, len(src.Tools))
	for i, t := range src.Tools {
		if strings.TrimSpace(t.Description) != "" {
			idx = append(idx, i)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e1f))
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	var out []Query
	for _, i := range idx[:min(n, len(idx))] {
		t := src.Tools[i]
		text := t.Description
		if j := strings.IndexAny(text, ".\n"); j > 0 {
			text = text[:j]
		}
		words := strings.Fields(text)
		text = strings.Join(words[:min(len(words), 30)], " ")
		if text == "" {
			continue
		}
		out = append(out, Query{Source: "self", QID: fmt.Sprintf("self:%d", i), Text: text,
			Golds: []Gold{{Server: t.Server, Tool: t.Name}}})
	}
	return out
}

// startRuntime starts an in-process runtime serving src as one static
// upstream, and connects a go-sdk client to it in memory.
func startRuntime(ctx context.Context, mode config.Mode, src catalog.Source, cards *choicecard.Builder) (*runtime.Runtime, *mcp.ClientSession, func(), error) {
	rt, err := runtime.New(benchConfig(mode, benchEnvironment, config.NewUpstream("catalog")),
		runtime.Deps{Cards: cards, Logger: discardLogger(), Catalogs: map[string]catalog.Source{"catalog": src}})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("runtime: %w", err)
	}
	err = rt.Start(ctx)
	if err == nil {
		err = rt.WaitPublished(ctx)
	}
	if err != nil {
		rt.Close()
		return nil, nil, nil, fmt.Errorf("runtime start: %w", err)
	}
	cs, closeSession, err := connectInMemory(ctx, rt.Server())
	if err != nil {
		rt.Close()
		return nil, nil, nil, err
	}
	return rt, cs, func() { closeSession(); rt.Close() }, nil
}

// countTools lists a session's tools and counts their prompt text.
func countTools(ctx context.Context, cs *mcp.ClientSession, counter *tokens.Counter) (int, []*mcp.Tool, error) {
	tools, err := listTools(ctx, cs)
	if err != nil {
		return 0, nil, err
	}
	text, err := ToolsText(tools)
	if err != nil {
		return 0, nil, err
	}
	return counter.Count(text), tools, nil
}

// BaselineTokens counts the tools/list of every tool of src as each
// upstream server lists it (one go-sdk server per server of src, listed by
// a go-sdk client), in one JSON array. It also returns the number of tools
// listed.
func BaselineTokens(ctx context.Context, src catalog.Source, counter *tokens.Counter) (tokensN, tools int, err error) {
	servers, err := upstreamServers(src)
	if err != nil {
		return 0, 0, err
	}
	var all []*mcp.Tool
	for _, s := range servers {
		cs, closeFn, err := connectInMemory(ctx, s)
		if err != nil {
			return 0, 0, err
		}
		ts, err := listTools(ctx, cs)
		closeFn()
		if err != nil {
			return 0, 0, err
		}
		all = append(all, ts...)
	}
	text, err := ToolsText(all)
	if err != nil {
		return 0, 0, err
	}
	return counter.Count(text), len(all), nil
}

// measureSize measures one catalog sample.
func measureSize(ctx context.Context, src catalog.Source, qs []Query, ks []int, cards *choicecard.Builder) (SizeTokens, error) {
	counter := cards.Counter()
	var st SizeTokens
	var err error
	if st.BaselineTokens, _, err = BaselineTokens(ctx, src, counter); err != nil {
		return st, err
	}

	prt, pcs, closeProxy, err := startRuntime(ctx, config.ModeProxy, src, cards)
	if err != nil {
		return st, err
	}
	st.ProxyTokens, _, err = countTools(ctx, pcs, counter)
	_ = prt
	closeProxy()
	if err != nil {
		return st, fmt.Errorf("proxy: %w", err)
	}
	st.ProxyReductionPct = reduction(float64(st.ProxyTokens), st.BaselineTokens)

	rt, cs, closeGateway, err := startRuntime(ctx, config.ModeGateway, src, cards)
	if err != nil {
		return st, err
	}
	defer closeGateway()
	snap := rt.Snapshot()
	items := snap.Items(toolid.KindTool)
	st.Tools = len(items)
	servers := map[string]bool{}
	present := map[[2]string]bool{}
	for _, it := range items {
		servers[it.Server] = true
		present[[2]string{it.Server, it.UpstreamName}] = true
	}
	st.Servers = len(servers)
	if st.MetaToolsTokens, _, err = countTools(ctx, cs, counter); err != nil {
		return st, fmt.Errorf("gateway: %w", err)
	}
	scored := presentGolds(qs, present)
	for _, k := range ks {
		g, err := measureGateway(ctx, cs, snap, qs, scored, k, counter)
		if err != nil {
			return st, err
		}
		g.GatewayTokens = float64(st.MetaToolsTokens) + g.BrowseTokens + g.HydrateTokens
		g.AgentTokensMean += float64(st.MetaToolsTokens)
		g.AgentTokensP50 += float64(st.MetaToolsTokens)
		g.AgentTokensP95 += float64(st.MetaToolsTokens)
		g.AgentTokensMax += float64(st.MetaToolsTokens)
		for i := range g.Sources {
			g.Sources[i].AgentTokensMean = round(g.Sources[i].AgentTokensMean+float64(st.MetaToolsTokens), 1)
		}
		g.ReductionPct = reduction(g.GatewayTokens, st.BaselineTokens)
		g.PctOfBaseline = round(100*g.GatewayTokens/float64(max(st.BaselineTokens, 1)), 3)
		g.GatewayTokens = round(g.GatewayTokens, 1)
		st.Gateway = append(st.Gateway, g)
	}
	return st, nil
}

func reduction(x float64, baseline int) float64 {
	if baseline <= 0 {
		return 0
	}
	return round(100*(1-x/float64(baseline)), 3)
}

// presentGolds returns qs with each qid's golds cut to those in the
// catalog (present holds server, name pairs); an entry is nil for a qid
// left without golds.
func presentGolds(qs []Query, present map[[2]string]bool) []*Query {
	out := make([]*Query, len(qs))
	for i, q := range qs {
		var golds []Gold
		for _, g := range q.Golds {
			in := present[[2]string{g.Server, g.Tool}]
			for _, s := range g.AltServers {
				in = in || present[[2]string{s, g.Tool}]
			}
			if in {
				golds = append(golds, g)
			}
		}
		if len(golds) > 0 {
			q.Golds = golds
			out[i] = &q
		}
	}
	return out
}

// measureGateway runs every query through tool_browse with top_k k and
// hydrates what an agent would.
func measureGateway(ctx context.Context, cs *mcp.ClientSession, snap *catalog.Snapshot, qs []Query, scored []*Query, k int, counter *tokens.Counter) (GatewayTokens, error) {
	g := GatewayTokens{TopK: k, Queries: len(qs)}
	var browseSum, hydrateSum float64
	hydrates := 0
	agent := make([]float64, len(qs))
	hydrateCost := map[string]float64{} // tool_id -> request + answer tokens
	type sourceAcc struct {
		qs     []Query
		ranked [][]router.Hit
		agent  float64
		n      int
	}
	bySource := map[string]*sourceAcc{}
	var order []string
	for i, q := range qs {
		if err := ctx.Err(); err != nil {
			return g, err
		}
		args := map[string]any{"query": q.Text, "top_k": k}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: runtime.ToolBrowse, Arguments: args})
		if err != nil {
			return g, fmt.Errorf("tool_browse %s: %w", q.QID, err)
		}
		if res.IsError {
			return g, fmt.Errorf("tool_browse %s: %s", q.QID, ResultText(res))
		}
		answer := float64(counter.Count(ResultText(res)))
		browseSum += answer
		cost := float64(counter.Count(CallText(runtime.ToolBrowse, args))) + answer
		ids, err := cardIDs(res)
		if err != nil {
			return g, fmt.Errorf("tool_browse %s: %w", q.QID, err)
		}
		hits := make([]router.Hit, 0, len(ids))
		for _, id := range ids {
			it, ok := snap.Lookup(id)
			if !ok {
				return g, fmt.Errorf("tool_browse %s: card %q is not in the catalog", q.QID, id)
			}
			hits = append(hits, router.Hit{Item: it})
		}
		// The agent hydrates every gold tool it was shown, or its best
		// guess (the first card) when it was shown none.
		var hydrate []string
		for _, h := range hits {
			for _, gold := range q.Golds {
				if gold.Matches(h.Item.Server, h.Item.UpstreamName) && !slices.Contains(hydrate, h.Item.ID) {
					hydrate = append(hydrate, h.Item.ID)
				}
			}
		}
		if len(hydrate) == 0 && len(hits) > 0 {
			hydrate = []string{hits[0].Item.ID}
		}
		for _, id := range hydrate {
			c, ok := hydrateCost[id]
			hargs := map[string]any{"tool_id": id}
			hres, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: runtime.ToolHydrate, Arguments: hargs})
			if err != nil {
				return g, fmt.Errorf("tool_hydrate %s: %w", id, err)
			}
			if hres.IsError {
				return g, fmt.Errorf("tool_hydrate %s: %s", id, ResultText(hres))
			}
			answer := float64(counter.Count(ResultText(hres)))
			if !ok {
				c = float64(counter.Count(CallText(runtime.ToolHydrate, hargs))) + answer
				hydrateCost[id] = c
			}
			hydrateSum += answer
			hydrates++
			cost += c
		}
		agent[i] = cost
		acc, ok := bySource[q.Source]
		if !ok {
			acc = &sourceAcc{}
			bySource[q.Source] = acc
			order = append(order, q.Source)
		}
		acc.agent += cost
		acc.n++
		if s := scored[i]; s != nil {
			acc.qs = append(acc.qs, *s)
			acc.ranked = append(acc.ranked, hits)
		}
	}
	if len(qs) > 0 {
		g.BrowseTokens = round(browseSum/float64(len(qs)), 1)
	}
	if hydrates > 0 {
		g.HydrateTokens = round(hydrateSum/float64(hydrates), 1)
	}
	g.AgentTokensMean, g.AgentTokensP50, g.AgentTokensP95, g.AgentTokensMax = summarize(agent)
	for _, s := range order {
		acc := bySource[s]
		sr := SourceRecall{Source: s, K: k, QIDs: len(acc.qs), AgentTokensMean: acc.agent / float64(acc.n)}
		if len(acc.qs) > 0 {
			sr.Recall = round(Score(acc.qs, acc.ranked, []int{k}).Recall[k], 4)
		}
		g.Sources = append(g.Sources, sr)
	}
	return g, nil
}

// summarize returns the mean, nearest-rank p50 and p95, and max of xs.
func summarize(xs []float64) (mean, p50, p95, mx float64) {
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	at := func(p float64) float64 {
		i := int(float64(len(s))*p+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return round(sum/float64(len(s)), 1), at(0.50), at(0.95), s[len(s)-1]
}

// cardIDs returns the card ids of a tool_browse answer, in order, from its
// structured content as the client received it.
func cardIDs(res *mcp.CallToolResult) ([]string, error) {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, fmt.Errorf("structured content: %w", err)
	}
	var v struct {
		Cards []struct {
			ID string `json:"id"`
		} `json:"cards"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("structured content: %w", err)
	}
	ids := make([]string, len(v.Cards))
	for i, c := range v.Cards {
		ids[i] = c.ID
	}
	return ids, nil
}

// firewallCase is one large result of the firewall section.
type firewallCase struct {
	name string
	text string
}

func firewallCases() []firewallCase {
	return []firewallCase{
		{"JSON 2 items (small)", GenJSON(2)},
		{"log 200 lines", GenLog(200)},
		{"log 5,000 lines", GenLog(5000)},
		{"JSON 20 items", GenJSON(20)},
		{"JSON 2,000 items", GenJSON(2000)},
		{"CSV 100 rows", GenCSV(100)},
		{"CSV 10,000 rows", GenCSV(10000)},
	}
}

// measureFirewall runs each large result through a runtime's tool_execute
// (a static upstream answering with the canned result) and compares the
// answer with the result itself.
func measureFirewall(ctx context.Context, cards *choicecard.Builder) ([]FirewallSaving, error) {
	counter := cards.Counter()
	cases := firewallCases()
	var src catalog.Source
	for i, c := range cases {
		res, err := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": c.text}}})
		if err != nil {
			return nil, fmt.Errorf("firewall case %q: %w", c.name, err)
		}
		src.Tools = append(src.Tools, catalog.ToolDef{Server: "results", Name: fmt.Sprintf("result_%d", i),
			Description: "Returns " + c.name + ".", InputSchema: json.RawMessage(`{"type":"object"}`), Result: res})
	}
	rt, cs, closeFn, err := startRuntime(ctx, config.ModeGateway, src, cards)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	ids := map[string]string{}
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		ids[it.UpstreamName] = it.ID
	}
	out := make([]FirewallSaving, 0, len(cases))
	for i, c := range cases {
		id := ids[fmt.Sprintf("result_%d", i)]
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: runtime.ToolExecute, Arguments: map[string]any{"tool_id": id, "args": map[string]any{}}})
		if err != nil {
			return nil, fmt.Errorf("tool_execute %s: %w", c.name, err)
		}
		if res.IsError {
			return nil, fmt.Errorf("tool_execute %s: %s", c.name, ResultText(res))
		}
		fs := FirewallSaving{Name: c.name, OriginalBytes: len(c.text), OriginalTokens: counter.Count(c.text),
			InlineTokens: counter.Count(ResultText(res))}
		fs.ReductionPct = reduction(float64(fs.InlineTokens), fs.OriginalTokens)
		var env struct {
			Artifacts []json.RawMessage `json:"artifacts"`
			Firewall  struct {
				Strategy       string `json:"strategy"`
				OriginalTokens int    `json:"original_tokens"`
				InlineTokens   int    `json:"inline_tokens"`
			} `json:"firewall"`
		}
		if b, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(b, &env) == nil {
			fs.Strategy = env.Firewall.Strategy
			fs.FirewallOriginalTokens = env.Firewall.OriginalTokens
			fs.FirewallInlineTokens = env.Firewall.InlineTokens
			fs.Artifacts = len(env.Artifacts)
		}
		out = append(out, fs)
	}
	return out, nil
}
