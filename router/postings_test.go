package router_test

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
)

// comparePostings checks that the router's postings rank the queries it
// composes for texts as a bleve index of the same documents does: the same
// hits in the same order, scores equal up to rounding (bleve sums a
// disjunction's clauses in an order of its own).
func comparePostings(t *testing.T, items []*catalog.Item, texts []string, relaxedEvery int) {
	t.Helper()
	x, err := router.NewIndex(items, router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	ref, err := router.NewReference(x, items, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	n := 0
	for i, text := range texts {
		for _, q := range router.Queries(x, text, relaxedEvery > 0 && i%relaxedEvery == 0) {
			for _, size := range []int{5, 100} {
				got, want, err := router.TopPair(x, ref, q, size, 5)
				if err != nil {
					t.Fatalf("%q: %v", text, err)
				}
				// bleve returns ties in its own document order when all
				// hits fit (rank settles their order by id).
				byScoreID(want)
				if !sameHits(got, want) {
					t.Errorf("%q (size %d): %s", text, size, firstDiff(got, want))
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no query compared")
	}
	t.Logf("%d queries ranked alike", n)
}

func byScoreID(h []router.ScoredID) {
	slices.SortStableFunc(h, func(a, b router.ScoredID) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// sameHits reports whether a and b hold the same hits with scores equal up
// to rounding, in the same order except within a group of scores equal up
// to rounding: bleve sums a disjunction's clauses in an order of its own,
// so equal sums may differ in their last bits, which orders near-ties its
// own way and may hide a tie at the cut (which top then drops whole). So
// a group at the end of the lists may hold different hits, and one list
// may have one group of near-tied hits more.
func sameHits(a, b []router.ScoredID) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-12*math.Max(1, math.Abs(y)) }
	if len(a) != len(b) {
		n := min(len(a), len(b))
		long := a
		if len(b) > len(a) {
			long = b
		}
		for _, h := range long[n:] {
			if !near(h.Score, long[n].Score) {
				return false
			}
		}
		a, b = a[:n], b[:n]
	}
	for i := 0; i < len(b); {
		j := i + 1
		for j < len(b) && near(b[j].Score, b[i].Score) {
			j++
		}
		want := map[string]bool{}
		for _, h := range b[i:j] {
			want[h.ID] = true
		}
		for _, h := range a[i:j] {
			if !near(h.Score, b[i].Score) || (!want[h.ID] && j < len(b)) {
				return false
			}
		}
		i = j
	}
	return true
}

// TestPostingsMatchBleve compares the router's postings with a bleve index
// over the real catalog and labelled queries, with the fallback's fuzzy and
// prefix queries for one query in ten.
func TestPostingsMatchBleve(t *testing.T) {
	items, qs := loadReal(t)
	texts := make([]string, 0, len(qs)+3)
	for _, q := range qs {
		texts = append(texts, q.Text)
	}
	texts = append(texts, "wheather forcastt", "kubernets deploymnt", "qqxq zzvq")
	comparePostings(t, items, texts, 10)
}

// TestPostingsMatchBleveSmall compares on a small hand-made catalog where
// clones tie, one field is empty everywhere, and words repeat.
func TestPostingsMatchBleveSmall(t *testing.T) {
	var defs []catalog.ToolDef
	for i := range 40 {
		defs = append(defs, catalog.ToolDef{
			Server:      fmt.Sprintf("srv%d", i%7),
			Name:        fmt.Sprintf("tool_%d_%s", i, []string{"list", "get", "create", "delete"}[i%4]),
			Description: []string{"List the files in a folder folder folder.", "Get the weather forecast.", "Create a pull request.", ""}[i%4],
			InputSchema: []byte(`{"type":"object"}`),
		})
	}
	defs = append(defs, catalog.ToolDef{Server: "clone", Name: "list_files", Description: "List the files in a folder folder folder.", InputSchema: []byte(`{"type":"object"}`)})
	items := ingest(t, defs)
	comparePostings(t, items, []string{"list files", "weather", "pull request folder", "tool", "crate", "forecst wether", "srv3 get"}, 1)
}

func firstDiff(a, b []router.ScoredID) string {
	for i := range min(len(a), len(b)) {
		if a[i].ID != b[i].ID || a[i].Score != b[i].Score {
			return fmt.Sprintf("len %d/%d, at %d: %v != %v (%v)", len(a), len(b), i, a[i:min(i+3, len(a))], b[i:min(i+3, len(b))], b[max(i-1, 0)])
		}
	}
	return fmt.Sprintf("len %d != %d", len(a), len(b))
}
