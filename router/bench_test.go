package router_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/benchmarks"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/toolid"
)

// BenchmarkNewIndex builds the index over the real 3,6k-tool catalog.
func BenchmarkNewIndex(b *testing.B) {
	items, _ := loadReal(b)
	b.ResetTimer()
	for b.Loop() {
		x, err := router.NewIndex(items, router.IndexOptions{})
		if err != nil {
			b.Fatal(err)
		}
		x.Close()
	}
}

// BenchmarkNewIndexX10 builds the index over the x10 synthetic catalog
// (36,190 tools).
func BenchmarkNewIndexX10(b *testing.B) {
	items := synthetic(b, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		x, err := router.NewIndex(items, router.IndexOptions{})
		if err != nil {
			b.Fatal(err)
		}
		x.Close()
	}
}

// BenchmarkSearchX10 runs the labelled queries against a synthetic
// catalog ten times the size of the real one.
func BenchmarkSearchX10(b *testing.B) {
	const dir = "../../shared/data"
	src, err := catalog.LoadFile(dir + "/tools.jsonl")
	if err != nil {
		b.Skip("shared data not present")
	}
	syn, _ := benchmarks.Synthesize(src, 10, 1)
	snap, err := benchmarks.IngestSource(syn)
	if err != nil {
		b.Fatal(err)
	}
	_, qs := loadReal(b)
	x, err := router.NewIndex(snap.Items(toolid.KindTool), router.IndexOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	searchEach(b, x, qs)
}

// BenchmarkSearch runs the labelled queries (k=10) round robin against the
// real catalog.
func BenchmarkSearch(b *testing.B) {
	items, qs := loadReal(b)
	x, err := router.NewIndex(items, router.IndexOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	searchEach(b, x, qs)
}

func searchEach(b *testing.B, x *router.Index, qs []benchmarks.Query) {
	ctx := context.Background()
	for _, src := range benchmarks.Sources(qs) {
		var texts []string
		for _, q := range qs {
			if q.Source == src {
				texts = append(texts, q.Text)
			}
		}
		b.Run(src, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := x.Search(ctx, texts[i%len(texts)], 10); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkTopX10Engines compares the router's postings with the bleve
// index it replaced (one segment, as built before) on the lexical queries
// the router composes for the labelled queries over the x10 catalog,
// alternately in rounds, so that the machine's load weighs on both alike.
func BenchmarkTopX10Engines(b *testing.B) {
	items := synthetic(b, 10)
	_, qs := loadReal(b)
	x, err := router.NewIndex(items, router.IndexOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	ref, err := router.NewReference(x, items, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer ref.Close()
	for _, src := range benchmarks.Sources(qs) {
		var bqs []any
		for _, q := range qs {
			if q.Source == src {
				bqs = append(bqs, router.Queries(x, q.Text, false)...)
			}
		}
		for round := range 2 {
			for _, engine := range []string{"bleve", "postings"} {
				b.Run(fmt.Sprintf("%s/%s/round%d", src, engine, round), func(b *testing.B) {
					b.ReportAllocs()
					n := 0
					for b.Loop() {
						q := bqs[n%len(bqs)]
						var err error
						if engine == "bleve" {
							err = router.TopReference(ref, q, 100, 10)
						} else {
							err = router.TopPostings(x, q, 100, 10)
						}
						if err != nil {
							b.Fatal(err)
						}
						n++
					}
				})
			}
		}
	}
}

// BenchmarkSearchFallback times the never-empty fallback on the real
// catalog: a misspelt query (relaxed words find it) and one nothing
// resembles but its trigrams (the full scan).
func BenchmarkSearchFallback(b *testing.B) {
	items, _ := loadReal(b)
	x, err := router.NewIndex(items, router.IndexOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	ctx := context.Background()
	for _, q := range []string{"wheather forcastt", "qqxq zzvq"} {
		if hits, _ := x.Search(ctx, q, 10); len(hits) == 0 || !hits[0].LowConfidence {
			b.Fatalf("%q: not a fallback answer", q)
		}
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := x.Search(ctx, q, 10); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSearchDense compares Search with the semantic signal off and on
// (dense stage over all tools, weight 0.1, common component removed),
// the two indexes built side by side and searched alternately in rounds,
// so that the machine's load weighs on both alike. QUIVER_BENCH_SCALE=10
// runs it on the x10 synthetic catalog.
func BenchmarkSearchDense(b *testing.B) {
	items, qs := loadReal(b)
	if os.Getenv("QUIVER_BENCH_SCALE") == "10" {
		items = synthetic(b, 10)
	}
	var xs [2]*router.Index
	for i, w := range []float64{0, 0.1} {
		c := router.DefaultConfig()
		c.DenseWeight, c.DensePC = w, true
		x, err := router.NewIndexConfig(items, c)
		if err != nil {
			b.Fatal(err)
		}
		defer x.Close()
		xs[i] = x
	}
	ctx := context.Background()
	for _, src := range benchmarks.Sources(qs) {
		var texts []string
		for _, q := range qs {
			if q.Source == src {
				texts = append(texts, q.Text)
			}
		}
		for round := range 2 {
			for i, name := range []string{"off", "dense"} {
				b.Run(fmt.Sprintf("%s/%s/round%d", src, name, round), func(b *testing.B) {
					b.ReportAllocs()
					n := 0
					for b.Loop() {
						if _, err := xs[i].Search(ctx, texts[n%len(texts)], 10); err != nil {
							b.Fatal(err)
						}
						n++
					}
				})
			}
		}
	}
}

// BenchmarkNewIndexDense is the build cost of the tool vectors: the index
// with the dense stage on (table parse and one vector per tool) against
// the default, on the real catalog.
func BenchmarkNewIndexDense(b *testing.B) {
	items, _ := loadReal(b)
	for round := range 2 {
		for _, w := range []float64{0, 0.1} {
			b.Run(fmt.Sprintf("w=%.1f/round%d", w, round), func(b *testing.B) {
				c := router.DefaultConfig()
				c.DenseWeight, c.DensePC = w, true
				b.ReportAllocs()
				for b.Loop() {
					x, err := router.NewIndexConfig(items, c)
					if err != nil {
						b.Fatal(err)
					}
					x.Close()
				}
			})
		}
	}
}

// BenchmarkDenseStage times the dense stage alone (query vector and a scan
// of every tool's vector), the part the semantic signal adds to a search.
// QUIVER_BENCH_SCALE=10 runs it on the x10 synthetic catalog.
func BenchmarkDenseStage(b *testing.B) {
	items, qs := loadReal(b)
	if os.Getenv("QUIVER_BENCH_SCALE") == "10" {
		items = synthetic(b, 10)
	}
	c := router.DefaultConfig()
	c.DenseWeight, c.DensePC = 0.1, true
	x, err := router.NewIndexConfig(items, c)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	for _, src := range benchmarks.Sources(qs) {
		var texts []string
		for _, q := range qs {
			if q.Source == src {
				texts = append(texts, q.Text)
			}
		}
		b.Run(src, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				router.DenseStage(x, texts[n%len(texts)])
				n++
			}
		})
	}
}

// BenchmarkBrowseFiltered browses the root of the real catalog's graph
// (3,619 tools) unfiltered and as a caller a policy lets see a fifth of the
// servers: the filtered browse asks the policy about every item below the
// root, as the runtime's tool_browse does.
func BenchmarkBrowseFiltered(b *testing.B) {
	items, _ := loadReal(b)
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		b.Fatal(err)
	}
	g, err := router.NewGraph(items, router.GraphOptions{Cards: cards})
	if err != nil {
		b.Fatal(err)
	}
	// Allow every fifth server by name, and the tools of one more by glob.
	var servers []string
	seen := map[string]bool{}
	for _, it := range items {
		if !seen[it.Server] {
			seen[it.Server] = true
			if len(seen)%5 == 0 {
				servers = append(servers, it.Server)
			}
		}
	}
	doc := fmt.Sprintf("policy_id: bench\nrules:\n  - id: some-servers\n    effect: allow\n    match: {principal: {sub: alice}, server: [%s]}\n"+
		"  - id: github-reads\n    effect: allow\n    match: {principal: {sub: alice}, tool_id: [\"github*:get_*\"]}\n", strings.Join(servers, ", "))
	pol, err := policy.Parse("bench.yaml", []byte(doc))
	if err != nil {
		b.Fatal(err)
	}
	alice := identity.Principal{Sub: "alice", Issuer: identity.LocalIssuer}
	see := func(it *catalog.Item) bool {
		return pol.Decide(policy.Request{Principal: alice, Server: it.Server, Namespace: it.Namespace, ToolID: it.ID,
			ToolClass: "unclassified", Risk: "LOW", TrustLevel: "unknown", Kind: string(it.Kind), Action: policy.ActionList}).Visible()
	}
	for _, c := range []struct {
		name string
		see  func(*catalog.Item) bool
	}{{"all", nil}, {"policy", see}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.BrowseFiltered("/", 0, "", c.see); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
