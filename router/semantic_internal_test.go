package router

import (
	"slices"
	"testing"

	"github.com/blevesearch/bleve/v2/search"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router/internal/wordvec"
)

// TestDenseWords: identifiers are split as for BM25, a camelCase run is
// looked up whole first, words without a vector are decompounded or
// skipped, so equal word bags give equal vectors.
func TestDenseWords(t *testing.T) {
	voc := newVocabulary()
	for _, w := range []string{"app", "config", "app", "config"} {
		voc.add(w, false)
	}
	tab, err := wordvec.Load()
	if err != nil {
		t.Fatal(err)
	}
	d := newDense(tab, nil, nil, voc, false, false)
	vec := func(s string) ([]float32, int) {
		v := make([]float32, d.dims)
		n := d.addText(v, s)
		return v, n
	}
	for _, tc := range []struct {
		a, b string
		n    int // words of a with a vector
	}{
		{"retrieveBalance", "retrieve balance", 2},
		{"create_pull_request", "create pull request", 3},
		{"GitHub", "github", 1},
		{"get-weather-FORECAST", "get weather forecast", 3},
		{"appconfig", "app config", 2},
		{"zzqxv 42", "", 0},
	} {
		va, n := vec(tc.a)
		vb, _ := vec(tc.b)
		if n != tc.n {
			t.Errorf("%q: %d words with a vector, want %d", tc.a, n, tc.n)
		}
		if !slices.Equal(va, vb) {
			t.Errorf("%q and %q have different vectors", tc.a, tc.b)
		}
	}
	if d.query("zzqxv") != nil {
		t.Error("a query without known words has a vector")
	}
}

// TestFuseDense checks the two fusions on hand-made candidates.
func TestFuseDense(t *testing.T) {
	items := []*catalog.Item{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	d := &dense{items: items}
	lex := search.DocumentMatchCollection{{ID: "a", Score: 4}, {ID: "b", Score: 2}}
	tied := search.DocumentMatchCollection{{ID: "b", Score: 2}, {ID: "a", Score: 2}}
	dh := []denseHit{{2, 0.9}, {1, 0.7}, {0, 0.5}}
	for _, tc := range []struct {
		name string
		cfg  config
		lex  search.DocumentMatchCollection
		want map[string]float64
	}{
		// a: 4/4 + 0.5*0; b: 2/4 + 0.5*0.5; c: 0.5*1
		{"sum", config{denseWeight: 0.5}, lex, map[string]float64{"a": 1, "b": 0.75, "c": 0.5}},
		{"rrf", config{denseWeight: 1, denseRRF: true}, lex, map[string]float64{
			"a": 1.0/61 + 1.0/63, "b": 1.0/62 + 1.0/62, "c": 1.0 / 61}},
		// BM25 ties share a rank, whatever order bleve gave them in.
		{"rrf ties", config{denseWeight: 1, denseRRF: true}, tied, map[string]float64{
			"a": 1.0/61 + 1.0/63, "b": 1.0/61 + 1.0/62, "c": 1.0 / 61}},
	} {
		x := &Index{cfg: tc.cfg, dense: d}
		out := x.fuseHits(tc.lex, dh)
		if len(out) != len(tc.want) {
			t.Fatalf("%s: %d hits, want %d", tc.name, len(out), len(tc.want))
		}
		for i, dm := range out {
			if w := tc.want[dm.ID]; abs(dm.Score-w) > 1e-9 {
				t.Errorf("%s: %s scored %v, want %v", tc.name, dm.ID, dm.Score, w)
			}
			if i > 0 && out[i-1].Score < dm.Score {
				t.Errorf("%s: not in score order", tc.name)
			}
		}
	}
}

func abs(f float64) float64 { return max(f, -f) }
