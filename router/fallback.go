package router

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/quiver-mcp/quiver/catalog"
)

// Visible reports whether the caller may see an item. A nil Visible sees
// every item.
type Visible func(*catalog.Item) bool

// The never-empty fallback. A non-empty query whose words match no tool the
// caller may see still gets cards, marked LowConfidence, from the first of
// these stages that finds any:
//
//  1. relaxed words: each query word as a fuzzy term (edit distance 1, or
//     2 from 8 letters), as a prefix (its Porter stem, from 4 letters),
//     and its curated and WordNet alternatives (expand.go, wordnet.go),
//     against names, server names and descriptions;
//  2. character trigrams: the share of the query's trigrams found in an
//     item's name, server name, card tags and description;
//  3. nothing resembles the query: the visible items in id order.
//
// Every stage goes through the same Visible as the lexical search, so a
// fallback never shows an item the caller may not see.

// Weights of the relaxed-word clauses.
const (
	fuzzyBoost  = 0.5
	prefixBoost = 0.7
	altBoost    = 0.6
	// minRelaxed is the shortest word relaxed by fuzzy and prefix terms.
	minRelaxed = 4
	// maxRelaxedWords bounds the words of stage 1 (the cost of fuzzy
	// terms grows with each).
	maxRelaxedWords = 16
	// trigramDescBytes bounds the description text stage 2 reads per item.
	trigramDescBytes = 400
)

// fallback runs the stages above; words are the query's analyzed terms.
func (x *Index) fallback(ctx context.Context, q string, words []string, k int, visible Visible) ([]Hit, error) {
	if rq := x.relaxedQuery(words); rq != nil {
		dms, err := x.top(ctx, rq, max(k, x.cfg.candidates), k)
		if err != nil {
			return nil, err
		}
		if hits := x.rank(dms, k, visible); len(hits) > 0 {
			return lowConfidence(hits), nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return lowConfidence(x.trigramHits(q, k, visible)), nil
}

func lowConfidence(hits []Hit) []Hit {
	for i := range hits {
		hits[i].LowConfidence = true
	}
	return hits
}

// relaxedQuery builds stage 1's query, or nil when no word yields a clause.
func (x *Index) relaxedQuery(words []string) query.Query {
	var clauses []query.Query
	add := func(q interface {
		query.Query
		SetField(string)
		SetBoost(float64)
	}, f field, boost float64) {
		q.SetField(fieldNames[f])
		q.SetBoost(boost * x.cfg.boost[f])
		clauses = append(clauses, q)
	}
	fields := [...]field{fieldName, fieldServer, fieldDesc}
	for _, w := range words[:min(len(words), maxRelaxedWords)] {
		if len(w) >= minRelaxed {
			fz := 1
			if len(w) >= 8 {
				fz = 2
			}
			stem := w
			if toks := x.stemAn.Analyze([]byte(w)); len(toks) == 1 {
				stem = string(toks[0].Term)
			}
			for _, f := range fields {
				fq := query.NewFuzzyQuery(w)
				fq.SetFuzziness(fz)
				add(fq, f, fuzzyBoost)
				if len(stem) >= minRelaxed {
					add(query.NewPrefixQuery(stem), f, prefixBoost)
				}
			}
		}
		for _, alts := range [...][]expansion{x.syn[w], x.wordnet()[w]} {
			for _, e := range alts {
				df := x.df[e.term]
				for _, f := range fields {
					if df[f] > 0 {
						add(query.NewTermQuery(e.term), f, altBoost*e.weight)
					}
				}
			}
		}
	}
	if len(clauses) == 0 {
		return nil
	}
	return query.NewDisjunctionQuery(clauses)
}

// trigramHits scores every item by the share of the query's distinct
// character trigrams (bytes of its letter and digit runs, ASCII folded to
// lower case) found
// in the item's text, and returns the k best the caller may see, ties in id
// order; with no trigram found anywhere, the first k visible items in id
// order, scored 0.
func (x *Index) trigramHits(q string, k int, visible Visible) []Hit {
	// The query's trigrams, numbered; seen filters the item trigrams (a
	// bit per 16-bit hash) so that most cost no map lookup.
	grams := map[uint32]int{}
	var seen [1 << 10]uint64
	eachTrigram(q, func(g [3]byte) {
		t := trigramKey(g)
		if _, ok := grams[t]; !ok {
			grams[t] = len(grams)
			b := trigramHash(t)
			seen[b>>6] |= 1 << (b & 63)
		}
	})
	mark := make([]int, len(grams))
	for i := range mark {
		mark[i] = -1
	}
	// The k best visible items (score descending, then id), the worst on
	// top of the heap.
	h := make(trigramHeap, 0, k+1)
	n := 0
	for _, it := range x.items {
		if visible != nil && !visible(it) {
			continue
		}
		found := 0
		if len(grams) > 0 {
			see := func(g [3]byte) {
				t := trigramKey(g)
				if b := trigramHash(t); seen[b>>6]&(1<<(b&63)) == 0 {
					return
				}
				if j, ok := grams[t]; ok && mark[j] != n {
					mark[j] = n
					found++
				}
			}
			eachTrigram(it.UpstreamName, see)
			eachTrigram(it.Server, see)
			for _, t := range it.Card.Tags {
				eachTrigram(t, see)
			}
			d := it.Card.Description
			if len(d) > trigramDescBytes {
				d = d[:trigramDescBytes]
			}
			eachTrigram(d, see)
		}
		n++
		sc := 0.0
		if len(grams) > 0 {
			sc = float64(found) / float64(len(grams))
		}
		c := Hit{Item: it, Score: sc}
		if len(h) < k {
			heap.Push(&h, c)
		} else if hitBefore(c, h[0]) {
			h[0] = c
			heap.Fix(&h, 0)
		}
	}
	out := []Hit(h)
	slices.SortFunc(out, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Item.ID, b.Item.ID)
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

func trigramKey(g [3]byte) uint32 { return uint32(g[0])<<16 | uint32(g[1])<<8 | uint32(g[2]) }

func trigramHash(t uint32) uint32 { return (t * 2654435761) >> 16 }

// hitBefore reports whether a ranks before b: higher score, then lower id.
func hitBefore(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Item.ID < b.Item.ID
}

// trigramHeap holds hits with the one that ranks last on top.
type trigramHeap []Hit

func (h trigramHeap) Len() int           { return len(h) }
func (h trigramHeap) Less(i, j int) bool { return hitBefore(h[j], h[i]) }
func (h trigramHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *trigramHeap) Push(x any)        { *h = append(*h, x.(Hit)) }
func (h *trigramHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// eachTrigram calls fn for every trigram of bytes within a run of letters
// and digits of s (ASCII letters and digits, and any non-ASCII byte),
// ASCII upper case folded to lower case as it goes (no copy of s).
func eachTrigram(s string, fn func([3]byte)) {
	var g [3]byte
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c >= 0x80 {
			g[0], g[1], g[2] = g[1], g[2], c
			run++
			if run >= 3 {
				fn(g)
			}
			continue
		}
		run = 0
	}
}
