package router_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/quiver-mcp/quiver/benchmarks"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
)

// TestDenseRecall prints the recall at 5, 20 and 50 of the dense stage
// alone, of BM25 alone and of their union (QUIVER_TUNE=1): how many golds
// each first stage can bring at all.
func TestDenseRecall(t *testing.T) {
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
	byID := map[string]*catalog.Item{}
	for _, it := range items {
		byID[it.ID] = it
	}
	cfg := router.DefaultConfig()
	cfg.DenseWeight, cfg.DensePC, cfg.DenseIDF = 1, os.Getenv("QUIVER_PC") != "", os.Getenv("QUIVER_IDF") != ""
	x, err := router.NewIndexConfig(items, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	base, err := router.NewIndexConfig(items, router.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	if os.Getenv("QUIVER_NB") != "" {
		c := router.DefaultConfig()
		c.VecWeight, c.VecTop, c.VecMin = 1, 5, 0.4
		v, err := router.NewIndexConfig(items, c)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		for _, w := range []string{"money", "park", "remember", "person", "weather", "movie", "song", "ticket", "stock", "trip", "paper"} {
			fmt.Println(w, router.Neighbours(v, w, 5, 0.4))
		}
	}
	ks := []int{5, 20, 50}
	for _, name := range []string{"azure_mcp", "livemcpbench", "blind"} {
		set := sets[name]
		dr := make([][]router.Hit, len(set))
		br := make([][]router.Hit, len(set))
		for i, q := range set {
			for _, id := range router.DenseIDs(x, q.Text, 50) {
				dr[i] = append(dr[i], router.Hit{Item: byID[id]})
			}
			br[i], _ = base.Search(context.Background(), q.Text, 50)
		}
		ur := make([][]router.Hit, len(set))
		for i := range set {
			ur[i] = append(ur[i], br[i]...)
			for _, h := range dr[i] {
				if !slices.ContainsFunc(ur[i], func(u router.Hit) bool { return u.Item.ID == h.Item.ID }) {
					ur[i] = append(ur[i], h)
				}
			}
		}
		ds := benchmarks.Score(set, dr, ks)
		bs := benchmarks.Score(set, br, ks)
		us := benchmarks.Score(set, ur, []int{100})
		fmt.Printf("%-13s dense R@5 %.3f R@20 %.3f R@50 %.3f | bm25 R@5 %.3f R@20 %.3f R@50 %.3f | union of both top 50 %.3f\n", name,
			ds.Recall[5], ds.Recall[20], ds.Recall[50], bs.Recall[5], bs.Recall[20], bs.Recall[50], us.Recall[100])
	}
}

// TestMissingGoldServers counts, for the livemcpbench golds outside BM25's
// top 50, how many belong to a server BM25 ranks among its top 5 or 6-10
// (QUIVER_TUNE=1): what completing the top servers could reach.
func TestMissingGoldServers(t *testing.T) {
	if os.Getenv("QUIVER_TUNE") == "" {
		t.Skip("set QUIVER_TUNE=1")
	}
	items, qs := loadReal(t)
	x, err := router.NewIndex(items, router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	total, in50, srv5, srv10 := 0, 0, 0, 0
	for _, q := range qs {
		if q.Source != "livemcpbench" {
			continue
		}
		hits, _ := x.Search(context.Background(), q.Text, 50)
		for _, g := range q.Golds {
			total++
			found := false
			for _, h := range hits {
				if g.Matches(h.Item.Server, h.Item.UpstreamName) {
					found = true
				}
			}
			if found {
				in50++
				continue
			}
			for i, h := range hits {
				if g.Matches(h.Item.Server, g.Tool) {
					if i < 5 {
						srv5++
					} else if i < 10 {
						srv10++
					}
					break
				}
			}
		}
	}
	fmt.Printf("golds %d, in BM25 top 50 %d; of the rest, server among top 5: %d, top 6-10: %d\n", total, in50, srv5, srv10)
}
