package router

import (
	"context"
	"fmt"

	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router/internal/wordvec"
)

// Tuning hooks for the external tests (tune_test.go).

// Config mirrors config with exported fields for the tuning harness.
type Config struct {
	Analyzer     [numFields]string
	Boost        [numFields]float64
	Structure    int
	JoinRuns     bool
	Decompound   bool
	KeepDigits   bool
	ServerWeight float64
	ServerTop    int
	Candidates   int
	Nested       bool
	QueryStop    bool
	FlatIDF      bool
	Enums        bool
	Combined     bool
	Abbrev       int
	AbbrevWeight float64
	NoSplit      bool
	SynWeight    float64
	AssocWeight  float64
	AssocTop     int
	AssocMin     int
	PrfDocs      int
	PrfTerms     int
	PrfWeight    float64
	RRF          bool
	SegWeight    float64
	WnWeight     float64
	WnDer        float64
	WnHyp        float64
	GapOnly      bool
	MaxDF        float64
	DenseWeight  float64
	DenseTop     int
	DenseRRF     bool
	DenseRerank  bool
	DensePC      bool
	DenseSeg     bool
	DenseIDF     bool
	VecWeight    float64
	VecTop       int
	VecMin       float64
}

// Analyzer names and structures for the harness.
const (
	AnEnglish = anEnglish
	AnPlain   = anPlain
	AnStem    = anStem
	AnStop    = anStop
	AnLight   = anLight
	AnSnow    = anSnow

	ByWord  = int(byWord)
	ByField = int(byField)
	Flat    = int(flat)
)

// DefaultConfig returns the measured default configuration.
func DefaultConfig() Config {
	c := defaultConfig()
	return Config{Analyzer: c.analyzer, Boost: c.boost, Structure: int(c.structure), JoinRuns: c.joinRuns,
		Decompound: c.decompound, KeepDigits: c.keepDigits, ServerWeight: c.serverWeight, ServerTop: c.serverTop,
		Candidates: c.candidates, Nested: c.nested, QueryStop: c.queryStop, FlatIDF: c.flatIDF, Enums: c.enums,
		Combined: c.combined, Abbrev: c.abbrev, AbbrevWeight: c.abbrevWeight, NoSplit: c.noSplit,
		SynWeight: c.synWeight, AssocWeight: c.assocWeight, AssocTop: c.assocTop, AssocMin: c.assocMin,
		PrfDocs: c.prfDocs, PrfTerms: c.prfTerms, PrfWeight: c.prfWeight, RRF: c.rrf, SegWeight: c.segWeight, WnWeight: c.wnWeight, WnDer: c.wnDer, WnHyp: c.wnHyp, GapOnly: c.gapOnly, MaxDF: c.maxDF,
		DenseWeight: c.denseWeight, DenseTop: c.denseTop, DenseRRF: c.denseRRF, DenseRerank: c.denseRerank, DensePC: c.densePC, DenseSeg: c.denseSeg, DenseIDF: c.denseIDF,
		VecWeight: c.vecWeight, VecTop: c.vecTop, VecMin: c.vecMin}
}

// NewIndexConfig builds an index with explicit knobs.
func NewIndexConfig(items []*catalog.Item, c Config) (*Index, error) {
	return newIndex(items, config{analyzer: c.Analyzer, boost: c.Boost, structure: structure(c.Structure),
		joinRuns: c.JoinRuns, decompound: c.Decompound, keepDigits: c.KeepDigits, serverWeight: c.ServerWeight,
		serverTop: c.ServerTop, candidates: c.Candidates, nested: c.Nested, queryStop: c.QueryStop,
		flatIDF: c.FlatIDF, enums: c.Enums, combined: c.Combined, abbrev: c.Abbrev, abbrevWeight: c.AbbrevWeight, noSplit: c.NoSplit,
		synWeight: c.SynWeight, assocWeight: c.AssocWeight, assocTop: c.AssocTop, assocMin: c.AssocMin,
		prfDocs: c.PrfDocs, prfTerms: c.PrfTerms, prfWeight: c.PrfWeight, rrf: c.RRF, segWeight: c.SegWeight, wnWeight: c.WnWeight, wnDer: c.WnDer, wnHyp: c.WnHyp, gapOnly: c.GapOnly, maxDF: c.MaxDF,
		denseWeight: c.DenseWeight, denseTop: c.DenseTop, denseRRF: c.DenseRRF, denseRerank: c.DenseRerank, densePC: c.DensePC, denseSeg: c.DenseSeg, denseIDF: c.DenseIDF,
		vecWeight: c.VecWeight, vecTop: c.VecTop, vecMin: c.VecMin, vectors: wordvec.Load})
}

// BoundaryTie reports whether the bleve hits of q tie across position size.
func BoundaryTie(x *Index, q string, size int) bool {
	bq := x.buildQuery(x.queryWords(q))
	if bq == nil {
		return false
	}
	res, err := x.post.search(context.Background(), bq, size+1)
	return err == nil && len(res) == size+1 && res[size].score == res[size-1].score
}

// Reference is a bleve scorch index of the documents of an Index, built as
// the router built its index before its own postings (reference_test.go).
type Reference struct{ r *reference }

// NewReference builds the bleve reference of x over items in batches of
// batch documents (0: one batch, one segment).
func NewReference(x *Index, items []*catalog.Item, batch int) (*Reference, error) {
	r, err := newReference(x, items, batch)
	if err != nil {
		return nil, err
	}
	return &Reference{r}, nil
}

// Close releases the reference.
func (r *Reference) Close() error { return r.r.idx.Close() }

// ScoredID is one hit of TopPair.
type ScoredID struct {
	ID    string
	Score float64
}

// Queries returns the queries x composes for q: the lexical query and,
// with relaxed, the fallback's relaxed query (nil when there is none).
func Queries(x *Index, q string, relaxed bool) []any {
	terms, gaps := x.queryTerms(x.queryWords(q))
	var out []any
	if bq := x.compose(terms); bq != nil {
		out = append(out, bq)
	}
	if relaxed {
		var words []string
		for _, t := range append(terms, gaps...) {
			words = append(words, t.term)
		}
		if rq := x.relaxedQuery(words); rq != nil {
			out = append(out, rq)
		}
	}
	return out
}

// TopPair returns the hits of q (from Queries) from x's postings and from
// the reference.
func TopPair(x *Index, r *Reference, q any, size, k int) (got, want []ScoredID, err error) {
	bq := q.(query.Query)
	a, err := x.top(context.Background(), bq, size, k)
	if err != nil {
		return nil, nil, err
	}
	b, err := r.r.top(context.Background(), bq, size, k)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range a {
		got = append(got, ScoredID{d.ID, d.Score})
	}
	for _, d := range b {
		want = append(want, ScoredID{d.ID, d.Score})
	}
	return got, want, nil
}

// TopPostings and TopReference run q (from Queries) on one engine.
func TopPostings(x *Index, q any, size, k int) error {
	_, err := x.top(context.Background(), q.(query.Query), size, k)
	return err
}

// TopReference runs q on the reference.
func TopReference(r *Reference, q any, size, k int) error {
	_, err := r.r.top(context.Background(), q.(query.Query), size, k)
	return err
}

// DenseIDs returns the ids of the n best visible tools of the dense stage
// alone (nil when it is off or q has no word vector).
func DenseIDs(x *Index, q string, n int) []string {
	if x.dense == nil {
		return nil
	}
	qv := x.dense.query(q)
	if qv == nil {
		return nil
	}
	dh, _ := x.dense.search(context.Background(), qv, n, nil)
	out := make([]string, len(dh))
	for i, h := range dh {
		out[i] = x.dense.items[h.i].ID
	}
	return out
}

// Neighbours returns the expansion terms of an analyzed term by word
// vectors, "term:cosine".
func Neighbours(x *Index, term string, top int, minCos float64) []string {
	if x.dense == nil || x.dense.words == nil {
		return nil
	}
	var out []string
	for _, e := range x.dense.neighbours(term, top, minCos) {
		out = append(out, fmt.Sprintf("%s:%.2f", e.term, e.weight))
	}
	return out
}

// DenseStage runs the dense stage alone (query vector and scan of every
// tool) and returns how many tools it kept.
func DenseStage(x *Index, q string) int {
	qv := x.dense.query(q)
	if qv == nil {
		return 0
	}
	dh, _ := x.dense.search(context.Background(), qv, x.cfg.denseTop, nil)
	return len(dh)
}
