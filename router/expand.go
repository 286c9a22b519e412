package router

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/search"
)

// Query expansion: alternatives for an analyzed query term, each with a
// weight in (0, 1] that multiplies the clause boost of the term it stands
// for. An expansion joins its term's group in the query (same position), so
// a tool matching only the alternative still counts as covering that query
// word, at a lower score: the fusion is a weighted sum of BM25 evidence.

// expansion is one alternative term.
type expansion struct {
	term   string
	weight float64
}

// expansions maps an analyzed term to its alternatives, best first.
type expansions map[string][]expansion

// add records alt as an alternative of term with weight w, keeping the
// highest weight of a repeated pair.
func (e expansions) add(term, alt string, w float64) {
	if term == alt {
		return
	}
	for i, x := range e[term] {
		if x.term == alt {
			e[term][i].weight = max(x.weight, w)
			return
		}
	}
	e[term] = append(e[term], expansion{term: alt, weight: w})
}

// analyzeTerms returns the distinct analyzed terms of s, in order.
func analyzeTerms(an analysis.Analyzer, s string) []string {
	var out []string
	for _, tok := range an.Analyze([]byte(s)) {
		t := string(tok.Term)
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// synonymExpansions analyzes the curated groups: a member that analyzes to
// one term gets every term of the other members as alternatives, those the
// catalog holds (known).
func synonymExpansions(an analysis.Analyzer, known func(string) bool) expansions {
	e := expansions{}
	for _, g := range synonymGroups {
		terms := make([][]string, len(g))
		for i, m := range g {
			terms[i] = analyzeTerms(an, splitWordsString(m))
		}
		for i := range g {
			if len(terms[i]) != 1 {
				continue
			}
			for j := range g {
				if j == i {
					continue
				}
				for _, t := range terms[j] {
					if known(t) {
						e.add(terms[i][0], t, 1)
					}
				}
			}
		}
	}
	return e
}

func splitWordsString(s string) string { return string(splitWords(nil, s, false, false)) }

// assocBuilder learns associations between description terms and name
// terms from the catalog: the normalised PMI of a (description term, name
// term) pair over the tools that hold both, so that a query word common in
// the descriptions of tools named with a word finds tools with that name
// word even when their own description lacks the query word.
type assocBuilder struct {
	ids   map[string]uint32
	terms []string
	dfD   []uint32 // tools whose description holds the term
	dfN   []uint32 // tools whose name holds the term
	pairs map[uint64]uint32
	n     int
	// scratch
	d, nm []uint32
}

func newAssocBuilder() *assocBuilder {
	return &assocBuilder{ids: map[string]uint32{}, pairs: map[uint64]uint32{}}
}

func (b *assocBuilder) id(t string) uint32 {
	if i, ok := b.ids[t]; ok {
		return i
	}
	i := uint32(len(b.terms))
	b.ids[t] = i
	b.terms = append(b.terms, t)
	b.dfD = append(b.dfD, 0)
	b.dfN = append(b.dfN, 0)
	return i
}

// addTool counts the distinct description and name terms of one tool.
func (b *assocBuilder) addTool(desc, name []string) {
	b.n++
	b.d, b.nm = b.d[:0], b.nm[:0]
	for _, t := range desc {
		i := b.id(t)
		if !slices.Contains(b.d, i) {
			b.d = append(b.d, i)
			b.dfD[i]++
		}
	}
	for _, t := range name {
		i := b.id(t)
		if !slices.Contains(b.nm, i) {
			b.nm = append(b.nm, i)
			b.dfN[i]++
		}
	}
	for _, d := range b.d {
		for _, n := range b.nm {
			if d != n {
				b.pairs[uint64(d)<<32|uint64(n)]++
			}
		}
	}
}

// build keeps, per description term, the top name terms by normalised PMI
// among pairs seen in at least minCount tools with a positive PMI, weighted
// by that NPMI (0..1).
func (b *assocBuilder) build(top, minCount int) expansions {
	type cand struct {
		n    uint32
		npmi float64
	}
	per := map[uint32][]cand{}
	N := float64(b.n)
	for k, c := range b.pairs {
		if int(c) < minCount {
			continue
		}
		d, n := uint32(k>>32), uint32(k)
		pdn := float64(c) / N
		pmi := math.Log(pdn / (float64(b.dfD[d]) / N * float64(b.dfN[n]) / N))
		if pmi <= 0 || pdn >= 1 {
			continue
		}
		per[d] = append(per[d], cand{n, pmi / -math.Log(pdn)})
	}
	e := make(expansions, len(per))
	for d, cs := range per {
		slices.SortFunc(cs, func(x, y cand) int {
			if c := cmp.Compare(y.npmi, x.npmi); c != 0 {
				return c
			}
			return cmp.Compare(b.terms[x.n], b.terms[y.n])
		})
		for _, c := range cs[:min(top, len(cs))] {
			e[b.terms[d]] = append(e[b.terms[d]], expansion{term: b.terms[c.n], weight: c.npmi})
		}
	}
	return e
}

// feedback returns one more group of terms (RM3-style pseudo-relevance
// feedback): the prfTerms terms of the name and description of the top
// prfDocs hits with the highest sum over those hits of (hit score / best
// score) * (term frequency / hit length) * idf, absent from the query,
// weighted by their share of the best term's weight.
func (x *Index) feedback(hits search.DocumentMatchCollection, terms []queryTerm) []queryTerm {
	inQuery := make(map[string]bool, len(terms))
	pos := 0
	for _, t := range terms {
		inQuery[t.term] = true
		pos = max(pos, t.pos+1)
	}
	best := hits[0].Score
	if best <= 0 {
		return nil
	}
	w := map[string]float64{}
	var buf []byte
	for _, dm := range hits[:min(x.cfg.prfDocs, len(hits))] {
		it := x.items[dm.ID]
		if it == nil {
			continue
		}
		t := textOf(it, &x.cfg)
		buf = buf[:0]
		for _, f := range [...]field{fieldName, fieldDesc} {
			for _, s := range t[f] {
				buf = splitWords(buf, s, x.cfg.keepDigits, false)
				buf = append(buf, ' ')
			}
		}
		toks := x.descAn.Analyze(buf)
		if len(toks) == 0 {
			continue
		}
		tf := map[string]int{}
		for _, tok := range toks {
			tf[string(tok.Term)]++
		}
		for term, c := range tf {
			if inQuery[term] {
				continue
			}
			df := x.df[term]
			d := float64(max(df[fieldDesc], df[fieldName])) + 1
			w[term] += dm.Score / best * float64(c) / float64(len(toks)) * math.Log(float64(x.total)/d)
		}
	}
	type tw struct {
		term string
		w    float64
	}
	var cands []tw
	for term, v := range w {
		if v > 0 {
			cands = append(cands, tw{term, v})
		}
	}
	slices.SortFunc(cands, func(a, b tw) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.term, b.term)
	})
	cands = cands[:min(x.cfg.prfTerms, len(cands))]
	var out []queryTerm
	for _, c := range cands {
		df := x.df[c.term]
		for f := range numFields {
			if df[f] > 0 && x.cfg.boost[f] > 0 {
				out = append(out, queryTerm{pos: pos, field: f, term: c.term, weight: c.w / cands[0].w})
			}
		}
	}
	return out
}

// fuse merges the hits of the query (orig) with those of its alternatives
// (alt): a hit's score becomes its score in orig over orig's best plus
// fuseWeight times its score in alt over alt's best (a weighted sum of
// max-normalised BM25 scores), or with config.rrf the reciprocal-rank
// fusion 1/(60+rank in orig) + fuseWeight/(60+rank in alt). The result is
// ordered by fused score, then id.
func (x *Index) fuse(orig, alt search.DocumentMatchCollection) search.DocumentMatchCollection {
	w := x.fuseWeight()
	score := make(map[string]float64, len(orig)+len(alt))
	add := func(hits search.DocumentMatchCollection, w float64) {
		if len(hits) == 0 || hits[0].Score <= 0 {
			return
		}
		best := hits[0].Score
		for i, dm := range hits {
			if x.cfg.rrf {
				score[dm.ID] += w / float64(60+i+1)
			} else {
				score[dm.ID] += w * dm.Score / best
			}
		}
	}
	add(orig, 1)
	add(alt, w)
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

// fuseWeight is the weight of the alternatives' evidence: the largest
// weight among the expansion sources that are on.
func (x *Index) fuseWeight() float64 {
	w := x.cfg.synWeight
	if x.assoc != nil {
		w = max(w, x.cfg.assocWeight)
	}
	if x.cfg.prfDocs > 0 {
		w = max(w, x.cfg.prfWeight)
	}
	w = max(w, x.cfg.wnWeight)
	w = max(w, x.cfg.vecWeight)
	return w
}

// segments splits a task-style query into its clauses: at sentence and
// clause punctuation (". ", ";", "!", "?", ",", ":", new lines) and at the
// conjunctions "and", "then", "also"; clauses of fewer than two words are
// dropped. A query with fewer than two clauses left returns nil.
func segments(q string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) >= 2 {
			out = append(out, strings.Join(cur, " "))
		}
		cur = cur[:0]
	}
	for _, w := range strings.Fields(q) {
		lw := strings.ToLower(w)
		if lw == "and" || lw == "then" || lw == "also" {
			flush()
			continue
		}
		end := strings.TrimRight(w, ".;!?,:")
		if end != "" {
			cur = append(cur, end)
		}
		if end != w || strings.ContainsAny(w, "\n") {
			flush()
		}
	}
	flush()
	if len(out) < 2 {
		return nil
	}
	return out
}

// fuseSegments adds to the query's hits the evidence of its clauses: a
// hit's score becomes its score over the query's best plus segWeight times
// the best, over the clauses, of its score over that clause's best.
func (x *Index) fuseSegments(orig search.DocumentMatchCollection, segs []search.DocumentMatchCollection) search.DocumentMatchCollection {
	score := make(map[string]float64, len(orig))
	if len(orig) > 0 && orig[0].Score > 0 {
		for _, dm := range orig {
			score[dm.ID] = dm.Score / orig[0].Score
		}
	}
	best := map[string]float64{}
	for _, hits := range segs {
		if len(hits) == 0 || hits[0].Score <= 0 {
			continue
		}
		for _, dm := range hits {
			best[dm.ID] = max(best[dm.ID], dm.Score/hits[0].Score)
		}
	}
	for id, s := range best {
		score[id] += x.cfg.segWeight * s
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
