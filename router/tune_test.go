package router_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/benchmarks"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/toolid"
)

// TestTune prints recall of configuration variants on the labelled queries,
// per source and per half (even / odd position within the source: the even
// half is used for choosing, the odd half is held out). It runs only with
// QUIVER_TUNE=1.
func TestTune(t *testing.T) {
	if os.Getenv("QUIVER_TUNE") == "" {
		t.Skip("set QUIVER_TUNE=1")
	}
	items, qs := loadReal(t)
	if sc := os.Getenv("QUIVER_TUNE_SCALE"); sc != "" {
		var scale int
		fmt.Sscan(sc, &scale)
		items = synthetic(t, scale)
	}
	only := os.Getenv("QUIVER_TUNE_ONLY")
	fmt.Printf("%-34s | %-17s | %-17s | %-17s | %-17s | build  | search\n", "variant  (R@1 R@5 R@10)", "livemcp even", "livemcp odd", "azure even", "azure odd")
	fmt.Printf("(build and mean search times are wall clock)\n")
	for _, v := range tuneVariants() {
		if only != "" && !strings.Contains(v.name, only) {
			continue
		}
		t0 := time.Now()
		x, err := router.NewIndexConfig(items, v.cfg)
		if err != nil {
			t.Fatal(err)
		}
		build := time.Since(t0)
		line := fmt.Sprintf("%-34s", v.name)
		var searchTime time.Duration
		searches := 0
		for _, src := range benchmarks.Sources(qs) {
			var halves [2][]benchmarks.Query
			n := 0
			for _, q := range qs {
				if q.Source == src {
					halves[n%2] = append(halves[n%2], q)
					n++
				}
			}
			for h := range 2 {
				ranked := make([][]router.Hit, len(halves[h]))
				for i, q := range halves[h] {
					t1 := time.Now()
					ranked[i], err = x.Search(context.Background(), q.Text, 10)
					searchTime += time.Since(t1)
					searches++
					if err != nil {
						t.Fatal(err)
					}
				}
				s := benchmarks.Score(halves[h], ranked, []int{1, 5, 10})
				line += fmt.Sprintf(" | %.3f %.3f %.3f", s.Recall[1], s.Recall[5], s.Recall[10])
			}
		}
		x.Close()
		fmt.Printf("%s | %4dms | %5.0fus\n", line, build.Milliseconds(), float64(searchTime.Microseconds())/float64(searches))
	}
}

// synthetic returns the items of the real catalog scaled by benchmarks.Synthesize.
func synthetic(t testing.TB, scale int) []*catalog.Item {
	src, err := catalog.LoadFile("../../shared/data/tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	syn, _ := benchmarks.Synthesize(src, scale, 1)
	snap, err := benchmarks.IngestSource(syn)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Items(toolid.KindTool)
}

type variant struct {
	name string
	cfg  router.Config
}

func loadReal(t testing.TB) ([]*catalog.Item, []benchmarks.Query) {
	t.Helper()
	const dir = "../../shared/data"
	if _, err := os.Stat(dir + "/tools.jsonl"); err != nil {
		t.Skip("shared data not present")
	}
	snap, err := benchmarks.LoadCatalog(dir + "/tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := benchmarks.LoadQueries(dir + "/queries.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return snap.Items(toolid.KindTool), qs
}

// TestTuneMisses prints the misses at top 5 of one variant (QUIVER_TUNE_MISS=name).
func TestTuneMisses(t *testing.T) {
	name := os.Getenv("QUIVER_TUNE_MISS")
	if name == "" {
		t.Skip("set QUIVER_TUNE_MISS=variant")
	}
	items, qs := loadReal(t)
	src := os.Getenv("QUIVER_TUNE_SRC")
	for _, v := range tuneVariants() {
		if v.name != name {
			continue
		}
		x, err := router.NewIndexConfig(items, v.cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		for _, q := range qs {
			if src != "" && q.Source != src {
				continue
			}
			hits, _ := x.Search(context.Background(), q.Text, 5)
			s := benchmarks.Score([]benchmarks.Query{q}, [][]router.Hit{hits}, []int{5})
			if s.Recall[5] == 1 {
				continue
			}
			fmt.Printf("\nQ %s  [%.2f]\n  gold:", q.Text, s.Recall[5])
			for _, g := range q.Golds {
				fmt.Printf(" %s/%s", g.Server, g.Tool)
			}
			fmt.Println()
			for _, h := range hits {
				fmt.Printf("  %6.3f %s/%s\n", h.Score, h.Item.Server, h.Item.UpstreamName)
			}
		}
	}
}
