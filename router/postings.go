package router

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// postings is the router's own inverted index: per field, each term's
// postings (document, frequency) in document order, and each document's
// field lengths. It replaces a bleve scorch index, whose general query
// path, per-hit allocations and segment building cost most of a search and
// most of a build's memory at 36k tools (benchmarks/README.md, routing).
//
// It evaluates the bleve query values the router composes (term,
// disjunction, fuzzy and prefix queries) and scores them exactly as bleve's
// BM25 does for a one-segment index (search/scorer/scorer_term.go,
// scorer_disjunction.go), so rankings are those of the bleve index it
// replaces; TestPostingsMatchBleve checks that against a real bleve index.
// In bleve's words:
//
//   - a term clause scores idf * tf*k1 / (tf + k1*(1-b+b*len/avg)) times its
//     query weight boost * idf * queryNorm, with tf the square root of the
//     term's frequency in the field, len the field length decoded from a
//     float32 norm 1/sqrt(tokens), and idf = ln(1 + (N-df+0.5)/(df+0.5));
//   - avg is not the mean field length but ceil(distinct terms of the
//     field / N) (bleve reads the field dictionary's cardinality). With
//     several segments bleve sums per-segment cardinalities, so its scores
//     change with segment boundaries (why indexing in batches of 1024
//     moved recall); here there is one dictionary, as in one segment;
//   - a disjunction scores the sum of its matching clauses times
//     matching / clauses;
//   - queryNorm = 1/sqrt(sum over every clause of (boost*idf)^2), set by
//     the outermost disjunction; a lone term clause has no query weight;
//   - fuzzy and prefix queries expand to a disjunction of the field's
//     terms within the edit distance (each boosted by 1/(distance+1)) or
//     with the prefix; one that expands to nothing or only to itself is a
//     term clause.
type postings struct {
	// ids holds item ids by document number, in ascending order, so that
	// document order is id order and ties need no string comparison.
	ids []string
	// lenPart holds k1*(1-b+b*len/avg) per field per document, the
	// length part of the BM25 denominator.
	lenPart [numFields][]float64
	avg     [numFields]float64
	// terms maps a term to its postings per field: an index into lists,
	// plus one (0: absent). dict holds each field's terms sorted, for
	// prefix and fuzzy expansion.
	terms map[string][numFields]uint32
	dict  [numFields][]string
	lists [][]posting

	scratch sync.Pool // *evalScratch
}

// posting is one document of a term's postings in one field.
type posting struct {
	doc  uint32
	freq uint32
}

// postingsBuilder gathers the postings of documents added in id order.
type postingsBuilder struct {
	p    *postings
	an   [numFields]analysis.Analyzer
	lens [numFields][]uint32
	freq map[string]uint32 // reused per field
	keys []string          // the terms of freq in first-seen order
	// memo holds the analysis of each distinct text of the fields other
	// than descriptions: names, servers and parameters repeat across the
	// tools of a server and across copies of a server.
	memo map[memoKey]analyzed
}

type memoKey struct {
	f    field
	text string
}

// analyzed is a field text's token count and term frequencies, in the
// order terms first occur.
type analyzed struct {
	tokens uint32
	terms  []termFreq
}

type termFreq struct {
	term string
	freq uint32
}

func newPostingsBuilder(n int, an [numFields]analysis.Analyzer) *postingsBuilder {
	b := &postingsBuilder{
		p:    &postings{ids: make([]string, 0, n), terms: map[string][numFields]uint32{}},
		an:   an,
		freq: map[string]uint32{},
		memo: map[memoKey]analyzed{},
	}
	for f := range numFields {
		b.lens[f] = make([]uint32, 0, n)
	}
	return b
}

// add indexes one document: the analyzed text of each field. Documents
// must be added in ascending id order.
func (b *postingsBuilder) add(id string, text *[numFields]string) {
	p := b.p
	doc := uint32(len(p.ids))
	p.ids = append(p.ids, id)
	for f := range numFields {
		a := b.analyze(f, text[f])
		b.lens[f] = append(b.lens[f], a.tokens)
		for _, tf := range a.terms {
			e := p.terms[tf.term]
			if e[f] == 0 {
				p.lists = append(p.lists, nil)
				e[f] = uint32(len(p.lists))
				p.terms[tf.term] = e
			}
			p.lists[e[f]-1] = append(p.lists[e[f]-1], posting{doc: doc, freq: tf.freq})
		}
	}
}

// analyze returns the analysis of text in field f.
func (b *postingsBuilder) analyze(f field, text string) analyzed {
	k := memoKey{f, text}
	if f != fieldDesc {
		if a, ok := b.memo[k]; ok {
			return a
		}
	}
	toks := b.an[f].Analyze([]byte(text))
	clear(b.freq)
	b.keys = b.keys[:0]
	for _, tok := range toks {
		n, ok := b.freq[string(tok.Term)]
		if !ok {
			b.keys = append(b.keys, string(tok.Term))
		}
		b.freq[string(tok.Term)] = n + 1
	}
	a := analyzed{tokens: uint32(len(toks)), terms: make([]termFreq, len(b.keys))}
	for i, t := range b.keys {
		a.terms[i] = termFreq{t, b.freq[t]}
	}
	if f != fieldDesc {
		b.memo[k] = a
	}
	return a
}

// finish computes the field statistics and compacts the postings into one
// array.
func (b *postingsBuilder) finish() *postings {
	b.memo = nil
	p := b.p
	n := float64(len(p.ids))
	for t, e := range p.terms {
		for f := range numFields {
			if e[f] != 0 {
				p.dict[f] = append(p.dict[f], t)
			}
		}
	}
	for f := range numFields {
		slices.Sort(p.dict[f])
		if len(p.ids) > 0 || len(p.dict[f]) > 0 {
			p.avg[f] = math.Ceil(float64(len(p.dict[f])) / n)
		}
		p.lenPart[f] = make([]float64, len(p.ids))
		for d, l := range b.lens[f] {
			p.lenPart[f][d] = lengthPart(l, p.avg[f])
		}
		b.lens[f] = nil
	}
	total := 0
	for _, l := range p.lists {
		total += len(l)
	}
	flat := make([]posting, 0, total)
	for i, l := range p.lists {
		flat = append(flat, l...)
		p.lists[i] = flat[len(flat)-len(l) : len(flat) : len(flat)]
	}
	return p
}

// lengthPart is k1*(1-b+b*len/avg) with len decoded as bleve decodes it
// from the float32 norm it stores per posting.
func lengthPart(tokens uint32, avg float64) float64 {
	if tokens == 0 || avg == 0 {
		return 0
	}
	norm := float64(float32(1 / math.Sqrt(float64(tokens))))
	fl := 1 / (norm * norm)
	return search.BM25_k1 * (1 - search.BM25_b + (search.BM25_b * fl / avg))
}

// df returns the document frequency of each field of term t.
func (p *postings) df(t string) [numFields]uint32 {
	var out [numFields]uint32
	e := p.terms[t]
	for f := range numFields {
		if e[f] != 0 {
			out[f] = uint32(len(p.lists[e[f]-1]))
		}
	}
	return out
}

func (p *postings) list(f field, t string) []posting {
	if i := p.terms[t][f]; i != 0 {
		return p.lists[i-1]
	}
	return nil
}

// node is a compiled query: a term clause (list) or a disjunction (kids).
type node struct {
	kids   []*node
	list   []posting
	field  field
	idf    float64
	boost  float64
	weight float64 // the clause's query weight, set by setNorm
}

func fieldOf(name string) (field, error) {
	for f, n := range fieldNames {
		if n == name {
			return field(f), nil
		}
	}
	return 0, fmt.Errorf("router: unknown field %q", name)
}

// compile resolves q's clauses against the postings.
func (p *postings) compile(q query.Query) (*node, error) {
	switch q := q.(type) {
	case *query.TermQuery:
		f, err := fieldOf(q.Field())
		if err != nil {
			return nil, err
		}
		return p.termNode(f, q.Term, q.Boost()), nil
	case *query.DisjunctionQuery:
		if q.Min > 1 {
			return nil, fmt.Errorf("router: disjunction with min %v", q.Min)
		}
		n := &node{kids: make([]*node, 0, len(q.Disjuncts))}
		for _, d := range q.Disjuncts {
			k, err := p.compile(d)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, k)
		}
		sortKids(n.kids)
		return n, nil
	case *query.PrefixQuery:
		f, err := fieldOf(q.Field())
		if err != nil {
			return nil, err
		}
		d := p.dict[f]
		i := sort.SearchStrings(d, q.Prefix)
		j := i
		for j < len(d) && strings.HasPrefix(d[j], q.Prefix) {
			j++
		}
		if j == i || (j == i+1 && d[i] == q.Prefix) {
			return p.termNode(f, q.Prefix, q.Boost()), nil
		}
		n := &node{kids: make([]*node, 0, j-i)}
		for _, t := range d[i:j] {
			n.kids = append(n.kids, p.termNode(f, t, q.Boost()))
		}
		sortKids(n.kids)
		return n, nil
	case *query.FuzzyQuery:
		f, err := fieldOf(q.Field())
		if err != nil {
			return nil, err
		}
		if q.Fuzziness < 0 || q.Fuzziness > 2 || q.Prefix != 0 {
			return nil, fmt.Errorf("router: fuzzy query with fuzziness %d, prefix %d", q.Fuzziness, q.Prefix)
		}
		if q.Fuzziness == 0 {
			return p.termNode(f, q.Term, q.Boost()), nil
		}
		var kids []*node
		var reuse []int
		one := true
		for _, t := range p.dict[f] {
			var ld int
			var over bool
			ld, over, reuse = search.LevenshteinDistanceMaxReuseSlice(q.Term, t, q.Fuzziness, reuse)
			if over || ld > q.Fuzziness {
				continue
			}
			one = one && t == q.Term
			kids = append(kids, p.termNode(f, t, q.Boost()/float64(ld+1)))
		}
		if len(kids) == 0 || (len(kids) == 1 && one) {
			return p.termNode(f, q.Term, q.Boost()), nil
		}
		sortKids(kids)
		return &node{kids: kids}, nil
	}
	return nil, fmt.Errorf("router: query type %T not supported", q)
}

func (p *postings) termNode(f field, t string, boost float64) *node {
	l := p.list(f, t)
	n, df := float64(len(p.ids)), float64(len(l))
	idf := 1.0 + math.Log(n/(df+1))
	if p.avg[f] > 0 {
		idf = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	return &node{list: l, field: f, idf: idf, boost: boost, weight: 1}
}

// sortKids orders clauses as bleve orders the searchers of a disjunction
// (fewest matches first), which fixes the order of a score's sum.
func sortKids(kids []*node) {
	slices.SortStableFunc(kids, func(a, b *node) int { return cmp.Compare(a.count(), b.count()) })
}

// count is the number of postings under n (bleve's Searcher.Count).
func (n *node) count() int {
	if n.kids == nil {
		return len(n.list)
	}
	c := 0
	for _, k := range n.kids {
		c += k.count()
	}
	return c
}

// sumWeights is the sum over n's clauses of (boost*idf)^2.
func (n *node) sumWeights() float64 {
	if n.kids == nil {
		w := n.boost * n.idf
		return w * w
	}
	s := 0.0
	for _, k := range n.kids {
		s += k.sumWeights()
	}
	return s
}

func (n *node) setNorm(norm float64) {
	if n.kids == nil {
		n.weight = n.boost * n.idf * norm
		return
	}
	for _, k := range n.kids {
		k.setNorm(norm)
	}
}

func (n *node) depth() int {
	d := 0
	for _, k := range n.kids {
		d = max(d, k.depth()+1)
	}
	return d
}

// evalScratch holds per-document accumulators, one level per depth of a
// disjunction, and the list of documents each level touched.
type evalScratch struct {
	sum     [][]float64
	n       [][]uint32
	touched [][]uint32
}

func (p *postings) getScratch(levels int) *evalScratch {
	s, _ := p.scratch.Get().(*evalScratch)
	if s == nil {
		s = &evalScratch{}
	}
	for len(s.sum) < levels {
		s.sum = append(s.sum, make([]float64, len(p.ids)))
		s.n = append(s.n, make([]uint32, len(p.ids)))
		s.touched = append(s.touched, nil)
	}
	return s
}

// termScore is bleve's BM25 score of one posting of a term clause.
func (p *postings) termScore(n *node, e posting) float64 {
	tf := math.Sqrt(float64(e.freq))
	var s float64
	if p.avg[n.field] > 0 {
		s = n.idf * (tf * search.BM25_k1) / (tf + p.lenPart[n.field][e.doc])
	} else {
		s = tf * float64(float32(1/math.Sqrt(float64(len(p.ids))))) * n.idf
	}
	if n.weight != 1.0 {
		s *= n.weight
	}
	return s
}

// eval accumulates disjunction n at level lvl of s; the documents it
// matched are then in s.touched[lvl] with their summed scores and counts.
func (p *postings) eval(ctx context.Context, n *node, s *evalScratch, lvl int) error {
	sum, cnt := s.sum[lvl], s.n[lvl]
	touched := s.touched[lvl][:0]
	for _, k := range n.kids {
		if err := ctx.Err(); err != nil {
			s.touched[lvl] = touched
			return err
		}
		if k.kids == nil {
			for _, e := range k.list {
				if cnt[e.doc] == 0 {
					touched = append(touched, e.doc)
				}
				sum[e.doc] += p.termScore(k, e)
				cnt[e.doc]++
			}
			continue
		}
		s.touched[lvl] = touched
		if err := p.eval(ctx, k, s, lvl+1); err != nil {
			return err
		}
		ksum, kcnt := s.sum[lvl+1], s.n[lvl+1]
		total := float64(len(k.kids))
		for _, d := range s.touched[lvl+1] {
			if cnt[d] == 0 {
				touched = append(touched, d)
			}
			sum[d] += ksum[d] * (float64(kcnt[d]) / total)
			cnt[d]++
			ksum[d], kcnt[d] = 0, 0
		}
		s.touched[lvl+1] = s.touched[lvl+1][:0]
	}
	s.touched[lvl] = touched
	return nil
}

// scored is a document and its score.
type scored struct {
	doc   uint32
	score float64
}

// worse reports whether a ranks after b: lower score, then higher id.
func worse(a, b scored) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.doc > b.doc
}

// bottom is a heap of the best hits with the worst on top.
type bottom []scored

func (h bottom) Len() int           { return len(h) }
func (h bottom) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h bottom) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *bottom) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *bottom) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// search returns the n best documents of q (score descending, then id
// ascending) with their scores.
func (p *postings) search(ctx context.Context, q query.Query, n int) ([]scored, error) {
	root, err := p.compile(q)
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, nil
	}
	h := make(bottom, 0, n+1)
	offer := func(c scored) {
		if len(h) < n {
			heap.Push(&h, c)
		} else if worse(h[0], c) {
			h[0] = c
			heap.Fix(&h, 0)
		}
	}
	if root.kids == nil { // a lone clause: no query norm, no coordination
		for _, e := range root.list {
			offer(scored{e.doc, p.termScore(root, e)})
		}
	} else {
		if sw := root.sumWeights(); sw > 0 {
			root.setNorm(1 / math.Sqrt(sw))
		}
		s := p.getScratch(root.depth())
		err := p.eval(ctx, root, s, 0)
		total := float64(len(root.kids))
		sum, cnt := s.sum[0], s.n[0]
		for _, d := range s.touched[0] {
			if err == nil {
				offer(scored{d, sum[d] * (float64(cnt[d]) / total)})
			}
			sum[d], cnt[d] = 0, 0
		}
		s.touched[0] = s.touched[0][:0]
		if err != nil {
			// A cancelled evaluation may leave deeper levels dirty.
			return nil, err
		}
		p.scratch.Put(s)
	}
	out := []scored(h)
	slices.SortFunc(out, func(a, b scored) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	return out, nil
}
