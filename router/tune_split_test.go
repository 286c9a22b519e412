package router_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/benchmarks"
	"github.com/quiver-mcp/quiver/router"
)

// splitCandidate is one query-expansion candidate of the protocol
// (benchmarks/routing-protocol.md) with its grid of settings.
type splitCandidate struct {
	name string
	grid []splitSetting
}

type splitSetting struct {
	label string
	cfg   router.Config
}

func splitCandidates() []splitCandidate {
	base := router.DefaultConfig()
	with := func(f func(c *router.Config)) router.Config {
		c := base
		f(&c)
		return c
	}
	var cs []splitCandidate
	syn := splitCandidate{name: "synonyms"}
	for _, w := range []float64{0.2, 0.35, 0.5, 0.7, 1} {
		syn.grid = append(syn.grid, splitSetting{fmt.Sprintf("w=%.2f", w), with(func(c *router.Config) { c.SynWeight = w })})
	}
	cs = append(cs, syn)
	assoc := splitCandidate{name: "assoc (PPMI)"}
	for _, w := range []float64{0.2, 0.4, 0.7} {
		for _, top := range []int{3, 8} {
			for _, mc := range []int{2, 4} {
				assoc.grid = append(assoc.grid, splitSetting{fmt.Sprintf("w=%.1f top=%d min=%d", w, top, mc),
					with(func(c *router.Config) { c.AssocWeight, c.AssocTop, c.AssocMin = w, top, mc })})
			}
		}
	}
	cs = append(cs, assoc)
	prf := splitCandidate{name: "RM3 feedback"}
	for _, docs := range []int{3, 10} {
		for _, terms := range []int{5, 15} {
			for _, w := range []float64{0.2, 0.5} {
				prf.grid = append(prf.grid, splitSetting{fmt.Sprintf("docs=%d terms=%d w=%.1f", docs, terms, w),
					with(func(c *router.Config) { c.PrfDocs, c.PrfTerms, c.PrfWeight = docs, terms, w })})
			}
		}
	}
	cs = append(cs, prf)
	seg := splitCandidate{name: "segments"}
	for _, w := range []float64{0.3, 0.5, 0.7, 1, 1.5} {
		seg.grid = append(seg.grid, splitSetting{fmt.Sprintf("w=%.1f", w), with(func(c *router.Config) { c.SegWeight = w })})
	}
	cs = append(cs, seg)
	synRRF := splitCandidate{name: "synonyms-rrf"}
	for _, w := range []float64{0.2, 0.35, 0.5, 0.7, 1} {
		synRRF.grid = append(synRRF.grid, splitSetting{fmt.Sprintf("w=%.2f", w), with(func(c *router.Config) { c.SynWeight, c.RRF = w, true })})
	}
	cs = append(cs, synRRF)
	wn := splitCandidate{name: "wordnet"}
	for _, w := range []float64{0.1, 0.2, 0.35, 0.5} {
		for _, rel := range [][2]float64{{0, 0}, {1, 0}, {1, 0.5}} {
			wn.grid = append(wn.grid, splitSetting{fmt.Sprintf("w=%.2f der=%.1f hyp=%.1f", w, rel[0], rel[1]),
				with(func(c *router.Config) { c.WnWeight, c.WnDer, c.WnHyp = w, rel[0], rel[1] })})
		}
	}
	cs = append(cs, wn)
	gap := splitCandidate{name: "gap-only"}
	for _, w := range []float64{0.2, 0.5, 1} {
		gap.grid = append(gap.grid,
			splitSetting{fmt.Sprintf("synonyms w=%.1f", w), with(func(c *router.Config) { c.SynWeight, c.GapOnly = w, true })},
			splitSetting{fmt.Sprintf("wordnet w=%.1f der=1", w), with(func(c *router.Config) { c.WnWeight, c.WnDer, c.GapOnly = w, 1, true })},
			splitSetting{fmt.Sprintf("both w=%.1f der=1", w), with(func(c *router.Config) { c.SynWeight, c.WnWeight, c.WnDer, c.GapOnly = w, w, 1, true })})
	}
	cs = append(cs, gap)
	prune := splitCandidate{name: "max-df"}
	for _, r := range []float64{0.02, 0.05, 0.1, 0.2} {
		prune.grid = append(prune.grid, splitSetting{fmt.Sprintf("maxDF=%.2f", r), with(func(c *router.Config) { c.MaxDF = r })})
	}
	cs = append(cs, prune)
	// The semantic signal (semantic.go): word-vector dense stage fused
	// with BM25.
	dn := splitCandidate{name: "dense"}
	for _, w := range []float64{0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1} {
		for _, pc := range []bool{false, true} {
			dn.grid = append(dn.grid, splitSetting{fmt.Sprintf("w=%.2f pc=%v", w, pc),
				with(func(c *router.Config) { c.DenseWeight, c.DensePC = w, pc })})
		}
	}
	cs = append(cs, dn)
	dnRRF := splitCandidate{name: "dense-rrf"}
	for _, w := range []float64{0.25, 0.5, 1, 2} {
		dnRRF.grid = append(dnRRF.grid, splitSetting{fmt.Sprintf("w=%.2f pc=true", w),
			with(func(c *router.Config) { c.DenseWeight, c.DensePC, c.DenseRRF = w, true, true })})
	}
	cs = append(cs, dnRRF)
	dnRe := splitCandidate{name: "dense-rerank"}
	for _, w := range []float64{0.1, 0.2, 0.35, 0.5, 1} {
		dnRe.grid = append(dnRe.grid, splitSetting{fmt.Sprintf("w=%.2f pc=true", w),
			with(func(c *router.Config) { c.DenseWeight, c.DensePC, c.DenseRerank = w, true, true })})
	}
	cs = append(cs, dnRe)
	dnSeg := splitCandidate{name: "dense-clauses"}
	for _, w := range []float64{0.1, 0.2, 0.35, 0.5} {
		dnSeg.grid = append(dnSeg.grid, splitSetting{fmt.Sprintf("w=%.2f pc=true", w),
			with(func(c *router.Config) { c.DenseWeight, c.DensePC, c.DenseSeg = w, true, true })})
	}
	cs = append(cs, dnSeg)
	dnIDF := splitCandidate{name: "dense-idf"}
	for _, w := range []float64{0.05, 0.1, 0.2, 0.35} {
		dnIDF.grid = append(dnIDF.grid, splitSetting{fmt.Sprintf("w=%.2f pc=true", w),
			with(func(c *router.Config) { c.DenseWeight, c.DensePC, c.DenseIDF = w, true, true })})
	}
	cs = append(cs, dnIDF)
	vec := splitCandidate{name: "vec-expand"}
	for _, w := range []float64{0.2, 0.5} {
		for _, mc := range []float64{0.55, 0.7} {
			for _, gap := range []bool{false, true} {
				vec.grid = append(vec.grid, splitSetting{fmt.Sprintf("w=%.1f min=%.2f top=3 gap=%v", w, mc, gap),
					with(func(c *router.Config) { c.VecWeight, c.VecMin, c.VecTop, c.GapOnly = w, mc, 3, gap })})
			}
		}
	}
	cs = append(cs, vec)
	return cs
}

type splitScore struct{ r5, mrr float64 }

// TestTuneSplit runs the protocol's split: for every candidate, the
// setting with the best recall@5 (ties: MRR) on one public set is picked
// and scored on the other, both ways; the blind set is scored with each
// picked setting. It runs only with QUIVER_TUNE=1 (QUIVER_TUNE_ONLY filters
// candidates by name).
func TestTuneSplit(t *testing.T) {
	if os.Getenv("QUIVER_TUNE") == "" {
		t.Skip("set QUIVER_TUNE=1")
	}
	items, qs := loadReal(t)
	blind, err := benchmarks.LoadQueries("../benchmarks/queries/blind.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string][]benchmarks.Query{"blind": blind}
	for _, q := range qs {
		sets[q.Source] = append(sets[q.Source], q)
	}
	score := func(x *router.Index, set []benchmarks.Query) splitScore {
		ranked := make([][]router.Hit, len(set))
		for i, q := range set {
			ranked[i], _ = x.Search(context.Background(), q.Text, 10)
		}
		s := benchmarks.Score(set, ranked, []int{5})
		return splitScore{s.Recall[5], s.MRR}
	}
	eval := func(c router.Config) map[string]splitScore {
		x, err := router.NewIndexConfig(items, c)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		out := map[string]splitScore{}
		for name, set := range sets {
			out[name] = score(x, set)
		}
		return out
	}
	base := eval(router.DefaultConfig())
	fmt.Printf("baseline: azure %.3f/%.3f livemcp %.3f/%.3f blind %.3f/%.3f (R@5/MRR)\n",
		base["azure_mcp"].r5, base["azure_mcp"].mrr, base["livemcpbench"].r5, base["livemcpbench"].mrr, base["blind"].r5, base["blind"].mrr)
	only := os.Getenv("QUIVER_TUNE_ONLY")
	for _, c := range splitCandidates() {
		if only != "" && !strings.Contains(c.name, only) {
			continue
		}
		results := make([]map[string]splitScore, len(c.grid))
		for i, s := range c.grid {
			results[i] = eval(s.cfg)
			r := results[i]
			fmt.Printf("  %-14s %-26s azure %.3f/%.3f livemcp %.3f/%.3f\n", c.name, s.label,
				r["azure_mcp"].r5, r["azure_mcp"].mrr, r["livemcpbench"].r5, r["livemcpbench"].mrr)
		}
		for _, dir := range [][2]string{{"azure_mcp", "livemcpbench"}, {"livemcpbench", "azure_mcp"}} {
			best := 0
			for i := range results {
				a, b := results[i][dir[0]], results[best][dir[0]]
				if a.r5 > b.r5 || (a.r5 == b.r5 && a.mrr > b.mrr) {
					best = i
				}
			}
			r := results[best]
			fmt.Printf("%-14s tune on %-12s -> %-26s tune %.3f (base %.3f)  report %s %.3f (base %.3f)  blind %.3f (base %.3f)\n",
				c.name, dir[0], c.grid[best].label, r[dir[0]].r5, base[dir[0]].r5, dir[1], r[dir[1]].r5, base[dir[1]].r5,
				r["blind"].r5, base["blind"].r5)
		}
	}
}
