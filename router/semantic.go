package router

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router/internal/wordvec"
)

// The semantic signal: a dense first stage over distributional word
// vectors (router/internal/wordvec, GloVe-derived, embedded in the binary),
// fused with BM25. A tool's vector is, per field, the SIF-weighted average
// of the unit vectors of its words (identifiers split as for BM25, a
// camelCase run looked up whole first: "GitHub" is one word), the field
// averages normalised and summed with fixed field weights, optionally with
// the component common to all tools removed (SIF's first principal
// component); a query's vector is its words' SIF-weighted average. The
// dense stage scores every tool the caller may see by cosine similarity
// and keeps the best denseTop; fuseDense merges them with the BM25
// candidates. Measured by the protocol of benchmarks/routing-protocol.md.

// denseFieldWeights weigh each field's average in a tool's vector. Fixed
// by reasoning, not tuned: names and descriptions say what a tool does,
// server and parameter names less so, parameter descriptions least.
var denseFieldWeights = [numFields]float32{
	fieldName:   1,
	fieldServer: 0.5,
	fieldDesc:   1,
	fieldParam:  0.5,
	fieldPDesc:  0.25,
}

// sifA is SIF's smoothing constant (Arora et al. use 1e-3 to 1e-4).
const sifA = 1e-3

// dense holds the tool vectors of an index.
type dense struct {
	tab   *wordvec.Table
	voc   *vocabulary
	dims  int
	items []*catalog.Item
	vecs  []float32 // len(items) rows of dims, unit length
	pc    []float32 // common component removed from every vector; nil: none
	row   map[string]int
	idf   map[string]float64 // catalog idf of words (nil: off)
	// words are the catalog's terms with a vector, wordVecs their unit
	// vectors (rows of dims), for the expansion by neighbours.
	words    []string
	wordVecs []float32
}

// newDense builds the tool vectors of items (texts[i] is items[i]'s text).
func newDense(tab *wordvec.Table, items []*catalog.Item, texts []itemText, voc *vocabulary, removePC, idf bool) *dense {
	d := &dense{tab: tab, voc: voc, dims: tab.Dims(), items: items, row: make(map[string]int, len(items))}
	if idf {
		d.catalogIDF(texts)
	}
	for i, it := range items {
		d.row[it.ID] = i
	}
	d.vecs = make([]float32, len(items)*d.dims)
	field := make([]float32, d.dims)
	for i := range items {
		row := d.vecs[i*d.dims : (i+1)*d.dims]
		for f := range numFields {
			if denseFieldWeights[f] == 0 {
				continue
			}
			clear(field)
			for _, s := range texts[i][f] {
				d.addText(field, s)
			}
			if wordvec.Normalize(field) == 0 {
				continue
			}
			for j, v := range field {
				row[j] += denseFieldWeights[f] * v
			}
		}
	}
	if removePC && len(items) > 1 {
		d.pc = firstComponent(d.vecs, d.dims)
		for i := range items {
			d.removePC(d.vecs[i*d.dims : (i+1)*d.dims])
		}
	}
	for i := range items {
		wordvec.Normalize(d.vecs[i*d.dims : (i+1)*d.dims])
	}
	return d
}

// addText adds the weighted vectors of the words of s to v and returns
// how many words had a vector. A word weighs its SIF weight, times its
// catalog idf when that is on.
func (d *dense) addText(v []float32, s string) int {
	n := 0
	d.eachWord(s, func(w string) bool {
		r, ok := d.tab.Rank(w)
		if !ok {
			return false
		}
		weight := wordvec.SIF(r, sifA)
		if d.idf != nil {
			if i, ok := d.idf[w]; ok {
				weight *= i
			}
		}
		d.tab.AddTo(v, w, float32(weight))
		n++
		return true
	})
	return n
}

// eachWord calls use with the words of s as the vectors see them: each run of
// letters and digits whole when it has several parts and use accepts it
// ("GitHub"), otherwise its parts, a part use refuses decompounded.
func (d *dense) eachWord(s string, use func(string) bool) {
	runs := 0
	eachRun(s, false, func(run string, parts []string) {
		if runs >= maxQueryWords || len(run) > maxRunBytes {
			return
		}
		runs++
		if len(parts) > 1 && use(lowerASCII(run)) {
			return
		}
		for _, p := range parts {
			w := lowerASCII(p)
			if use(w) {
				continue
			}
			for _, c := range d.voc.decompound(w) {
				use(c)
			}
		}
	})
}

// catalogIDF sets d.idf: per word with a vector, log((N+1)/(df+1)) over
// log(N+1), df the number of items whose text holds it; a word no item
// holds keeps weight 1.
func (d *dense) catalogIDF(texts []itemText) {
	df := map[string]int{}
	seen := map[string]bool{}
	for i := range texts {
		clear(seen)
		for f := range numFields {
			if denseFieldWeights[f] == 0 {
				continue
			}
			for _, s := range texts[i][f] {
				d.eachWord(s, func(w string) bool {
					if _, ok := d.tab.Rank(w); !ok {
						return false
					}
					if !seen[w] {
						seen[w] = true
						df[w]++
					}
					return true
				})
			}
		}
	}
	n := math.Log(float64(len(texts) + 1))
	d.idf = make(map[string]float64, len(df))
	for w, c := range df {
		d.idf[w] = math.Log(float64(len(texts)+1)/float64(c+1)) / n
	}
}

// query returns the unit vector of q, or nil when no word of q has one.
func (d *dense) query(q string) []float32 {
	v := make([]float32, d.dims)
	if d.addText(v, q) == 0 {
		return nil
	}
	if d.pc != nil {
		d.removePC(v)
	}
	if wordvec.Normalize(v) == 0 {
		return nil
	}
	return v
}

func (d *dense) removePC(v []float32) {
	p := wordvec.Dot(v, d.pc)
	for j := range v {
		v[j] -= p * d.pc[j]
	}
}

// firstComponent returns the unit first right singular vector of the rows
// of m (uncentred, as SIF), by power iteration.
func firstComponent(m []float32, dims int) []float32 {
	u := make([]float32, dims)
	for j := range u {
		u[j] = 1
	}
	wordvec.Normalize(u)
	next := make([]float32, dims)
	for range 30 {
		clear(next)
		for i := 0; i+dims <= len(m); i += dims {
			row := m[i : i+dims]
			p := wordvec.Dot(row, u)
			for j, x := range row {
				next[j] += p * x
			}
		}
		if wordvec.Normalize(next) == 0 {
			return nil
		}
		u, next = next, u
	}
	return u
}

// denseHit is one tool of the dense stage.
type denseHit struct {
	i     int
	score float32
}

// search returns the top best visible tools by cosine with qv (the best
// cosine with any of qvs), best first (ties: id), honouring ctx every few
// thousand tools.
func (d *dense) search(ctx context.Context, qv []float32, top int, visible Visible, qvs ...[]float32) ([]denseHit, error) {
	out := make([]denseHit, 0, top+1)
	less := func(a, b denseHit) int { // best first
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(d.items[a.i].ID, d.items[b.i].ID)
	}
	for i, it := range d.items {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if visible != nil && !visible(it) {
			continue
		}
		row := d.vecs[i*d.dims : (i+1)*d.dims]
		s := wordvec.Dot(qv, row)
		for _, v := range qvs {
			s = max(s, wordvec.Dot(v, row))
		}
		h := denseHit{i, s}
		if len(out) == top && less(h, out[top-1]) >= 0 {
			continue
		}
		at, _ := slices.BinarySearchFunc(out, h, less)
		out = slices.Insert(out, at, h)
		if len(out) > top {
			out = out[:top]
		}
	}
	return out, nil
}

// denseStage fuses the dense stage into the BM25 candidates hits (of the
// query bq, cut at size). When every candidate is hidden and more items
// match beyond the cut, the candidates are first all of bq's matches, as
// lexical does without the dense stage: a visible lexical match must not
// lose to the dense stage's guesses for want of a place in the cut.
func (x *Index) denseStage(ctx context.Context, q string, bq query.Query, hits search.DocumentMatchCollection, size, k int, visible Visible) (search.DocumentMatchCollection, error) {
	if visible != nil && len(hits) >= size && !slices.ContainsFunc(hits, func(dm *search.DocumentMatch) bool {
		it := x.items[dm.ID]
		return it != nil && visible(it)
	}) {
		all, err := x.top(ctx, bq, len(x.items), k)
		if err != nil {
			return nil, err
		}
		hits = all
	}
	return x.fuseDense(ctx, q, hits, visible)
}

// fuseDense merges the BM25 candidates (lex, best first) with the dense
// stage's: a tool's score becomes its BM25 score over the best plus
// denseWeight times its cosine min-max normalised over the dense
// candidates (cosines of averaged word vectors share a high floor, so the
// floor is taken off), or with denseRRF the reciprocal-rank fusion
// 1/(60+BM25 rank) + denseWeight/(60+dense rank). A tool missing from a
// list gets nothing from it. With denseSeg a tool's cosine is its best
// with the whole query or any of its clauses (segments). With denseRerank the dense stage only
// re-scores the BM25 candidates (no tool enters from it).
func (x *Index) fuseDense(ctx context.Context, q string, lex search.DocumentMatchCollection, visible Visible) (search.DocumentMatchCollection, error) {
	qv := x.dense.query(q)
	if qv == nil {
		return lex, nil
	}
	var dh []denseHit
	if x.cfg.denseRerank {
		for _, dm := range lex {
			if i, ok := x.dense.row[dm.ID]; ok {
				dh = append(dh, denseHit{i, wordvec.Dot(qv, x.dense.vecs[i*x.dense.dims:(i+1)*x.dense.dims])})
			}
		}
		slices.SortFunc(dh, func(a, b denseHit) int { return cmp.Compare(b.score, a.score) })
	} else {
		var qvs [][]float32
		if x.cfg.denseSeg {
			for _, sg := range segments(q) {
				if v := x.dense.query(sg); v != nil {
					qvs = append(qvs, v)
				}
			}
		}
		var err error
		if dh, err = x.dense.search(ctx, qv, max(x.cfg.denseTop, 1), visible, qvs...); err != nil {
			return nil, err
		}
	}
	if len(dh) == 0 {
		return lex, nil
	}
	return x.fuseHits(lex, dh), nil
}

// fuseHits is fuseDense's fusion of the BM25 candidates lex and the dense
// candidates dh (both best first).
func (x *Index) fuseHits(lex search.DocumentMatchCollection, dh []denseHit) search.DocumentMatchCollection {
	w := x.cfg.denseWeight
	score := make(map[string]float64, len(lex)+len(dh))
	if len(lex) > 0 && lex[0].Score > 0 {
		rank := 0
		for i, dm := range lex {
			// BM25 ties come in bleve's internal order, which varies
			// between builds: a tied group shares its first rank.
			if i == 0 || dm.Score != lex[i-1].Score {
				rank = i
			}
			if x.cfg.denseRRF {
				score[dm.ID] += 1 / float64(60+rank+1)
			} else {
				score[dm.ID] += dm.Score / lex[0].Score
			}
		}
	}
	hi, lo := float64(dh[0].score), float64(dh[len(dh)-1].score)
	rank := 0
	for r, h := range dh {
		if r == 0 || h.score != dh[r-1].score {
			rank = r
		}
		id := x.dense.items[h.i].ID
		switch {
		case x.cfg.denseRRF:
			score[id] += w / float64(60+rank+1)
		case hi > lo:
			score[id] += w * (float64(h.score) - lo) / (hi - lo)
		default:
			score[id] += w
		}
	}
	out := make(search.DocumentMatchCollection, 0, len(score))
	for id, s := range score {
		out = append(out, &search.DocumentMatch{ID: id, Score: s})
	}
	slices.SortFunc(out, func(a, b *search.DocumentMatch) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// catalogWords gathers the analyzed terms of the index (df's keys) that
// have a word vector: the targets of the query expansion by neighbours.
func (d *dense) catalogWords(df map[string][numFields]uint32) {
	d.words = d.words[:0]
	for t := range df {
		if _, ok := d.tab.Rank(t); ok && len(t) > 2 {
			d.words = append(d.words, t)
		}
	}
	slices.Sort(d.words)
	d.wordVecs = make([]float32, len(d.words)*d.dims)
	for i, t := range d.words {
		d.tab.AddTo(d.wordVecs[i*d.dims:(i+1)*d.dims], t, 1)
	}
}

// neighbours returns the top catalog terms nearest to term by cosine, at
// least minCos, weighted by their cosine; nil when term has no vector.
func (d *dense) neighbours(term string, top int, minCos float64) []expansion {
	v := make([]float32, d.dims)
	if !d.tab.AddTo(v, term, 1) || wordvec.Normalize(v) == 0 {
		return nil
	}
	var out []expansion
	for i, w := range d.words {
		c := float64(wordvec.Dot(v, d.wordVecs[i*d.dims:(i+1)*d.dims]))
		if c < minCos || w == term {
			continue
		}
		at := len(out)
		for at > 0 && out[at-1].weight < c {
			at--
		}
		if at >= top {
			continue
		}
		out = slices.Insert(out, at, expansion{term: w, weight: c})
		if len(out) > top {
			out = out[:top]
		}
	}
	return out
}
