package router

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2/search/query"
)

// queryStopWords are the conversational words of task-style queries
// ("please help me ...", "I want to ..."); the analyzers' English stop list
// holds the function words. Used only with config.queryStop.
var queryStopWords = map[string]bool{
	"please": true, "help": true, "want": true, "need": true, "would": true, "like": true,
	"could": true, "can": true, "me": true, "my": true, "i": true, "you": true, "your": true,
	"us": true, "we": true, "our": true, "let": true, "know": true, "tell": true, "also": true,
	"some": true, "any": true, "all": true, "every": true, "thing": true, "things": true,
	"something": true, "anything": true, "everything": true, "really": true, "just": true,
	"kindly": true, "thanks": true, "thank": true, "able": true, "should": true, "will": true,
}

// Query guards. A run of letters and digits longer than maxRunBytes is a
// blob (base64, a hash, a token), not a word, and is skipped; words past
// the first maxQueryWords are ignored. Both bound the cost of a search.
const (
	maxRunBytes   = 40
	maxQueryWords = 128
)

// qword is one alternative of a query word: a part of a run, the whole
// run, a decompounded part, or an abbreviation (nameOnly).
type qword struct {
	pos      int // the run it came from
	text     string
	weight   float64
	nameOnly bool
}

// queryWords splits q into words the way item text was split, one group
// (pos) per run of letters and digits holding its parts and the
// alternatives derived from them.
func (x *Index) queryWords(q string) []qword {
	out := make([]qword, 0, len(q)/4+4)
	pos := 0
	cfg := &x.cfg
	if cfg.noSplit {
		for _, w := range strings.Fields(q) {
			out = append(out, qword{pos: len(out), text: w, weight: 1})
		}
		return out
	}
	eachRun(q, cfg.keepDigits, func(run string, parts []string) {
		if len(run) > maxRunBytes || pos >= maxQueryWords {
			return
		}
		n := len(out)
		add := func(w string, weight float64, nameOnly bool) {
			for _, o := range out[n:] {
				if o.text == w && o.nameOnly == nameOnly {
					return
				}
			}
			out = append(out, qword{pos: pos, text: w, weight: weight, nameOnly: nameOnly})
		}
		for _, p := range parts {
			w := lowerASCII(p)
			if cfg.queryStop && queryStopWords[w] {
				continue
			}
			add(w, 1, false)
			for _, d := range x.voc.decompound(w) {
				add(d, 1, false)
			}
			if cfg.abbrev > 0 {
				for l := cfg.abbrev; l < len(w); l++ {
					if x.names[w[:l]] {
						add(w[:l], cfg.abbrevWeight, true)
					}
				}
			}
		}
		if len(parts) > 1 {
			w := lowerASCII(run)
			if cfg.joinRuns {
				add(w, 1, false)
			}
			for _, d := range x.voc.decompound(w) {
				add(d, 1, false)
			}
		}
		if len(out) > n {
			pos++
		}
	})
	return out
}

// queryTerm is one (field, term) clause of a query.
type queryTerm struct {
	pos    int
	field  field
	term   string
	weight float64
}

type termKey struct {
	field field
	term  string
}

// buildQuery analyzes the query words and builds the bleve query; nil when
// no analyzed term occurs in any field.
func (x *Index) buildQuery(words []qword) query.Query {
	terms, _ := x.queryTerms(words)
	return x.compose(terms)
}

// queryTerms analyzes the query words (once per distinct analyzer, all
// words in one pass) into (field, term) clauses; gaps holds the analyzed
// terms no field holds (their field is meaningless), for the expansions
// and the fallback.
func (x *Index) queryTerms(words []qword) (terms, gaps []queryTerm) {
	if len(words) == 0 {
		return nil, nil
	}
	buf := make([]byte, 0, 16*len(words))
	starts := make([]int, len(words)) // byte offset of each word in buf
	for i, w := range words {
		if i > 0 {
			buf = append(buf, ' ')
		}
		starts[i] = len(buf)
		buf = append(buf, w.text...)
	}
	terms = make([]queryTerm, 0, 2*len(words))
	seen := make(map[termKey]int, 2*len(words))
	for _, qa := range x.analyzers {
		wi := 0
		for _, tok := range qa.an.Analyze(buf) {
			for wi+1 < len(words) && starts[wi+1] <= tok.Start {
				wi++
			}
			w := &words[wi]
			df, ok := x.df[string(tok.Term)] // no allocation for the lookup
			if !ok {
				gaps = append(gaps, queryTerm{pos: w.pos, term: string(tok.Term), weight: w.weight})
				continue
			}
			var t string
			for _, f := range qa.fields {
				if df[f] == 0 || (w.nameOnly && f != fieldName && f != fieldServer) {
					continue
				}
				if x.cfg.maxDF > 0 && float64(df[f]) > x.cfg.maxDF*float64(x.total) {
					continue // too common in this field to tell items apart
				}
				if t == "" {
					t = string(tok.Term)
				}
				// One clause per (field, term): a repeated word counts
				// once, at its first position, with its highest weight.
				k := termKey{f, t}
				if i, dup := seen[k]; dup {
					terms[i].weight = max(terms[i].weight, w.weight)
					continue
				}
				seen[k] = len(terms)
				terms = append(terms, queryTerm{pos: w.pos, field: f, term: t, weight: w.weight})
			}
		}
	}
	return terms, gaps
}

// expand returns the alternatives (expand.go) of every (position, term) of
// from that are not among terms (the query's own clauses), in every field that
// holds them, at the position of the term they stand for, weighted by that
// term's weight times the alternative's own; a repeated clause keeps its
// highest weight. The result is ordered by position.
func (x *Index) expand(from, terms []queryTerm) []queryTerm {
	type posTerm struct {
		pos  int
		term string
	}
	inQuery := make(map[string]bool, len(terms))
	for _, t := range terms {
		inQuery[t.term] = true
	}
	done := make(map[posTerm]bool, len(from))
	seen := map[termKey]int{}
	var out []queryTerm
	for _, t := range from {
		if done[posTerm{t.pos, t.term}] {
			continue
		}
		done[posTerm{t.pos, t.term}] = true
		var sources [4][]expansion
		if x.cfg.synWeight > 0 {
			sources[0] = x.syn[t.term]
		}
		if x.cfg.wnWeight > 0 {
			sources[1] = x.wordnet()[t.term]
		}
		sources[2] = x.assoc[t.term]
		if x.cfg.vecWeight > 0 {
			sources[3] = x.dense.neighbours(t.term, x.cfg.vecTop, x.cfg.vecMin)
		}
		for _, alts := range sources {
			for _, e := range alts {
				if inQuery[e.term] {
					continue
				}
				df := x.df[e.term]
				w := t.weight * e.weight
				for f := range numFields {
					if df[f] == 0 || x.cfg.boost[f] <= 0 {
						continue
					}
					k := termKey{f, e.term}
					if j, dup := seen[k]; dup {
						out[j].weight = max(out[j].weight, w)
						continue
					}
					seen[k] = len(out)
					out = append(out, queryTerm{pos: t.pos, field: f, term: e.term, weight: w})
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b queryTerm) int { return cmp.Compare(a.pos, b.pos) })
	return out
}

// compose builds the bleve query of clauses; nil when there are none.
func (x *Index) compose(terms []queryTerm) query.Query {
	if len(terms) == 0 {
		return nil
	}

	clause := func(t queryTerm) query.Query {
		q := query.NewTermQuery(t.term)
		q.SetField(fieldNames[t.field])
		b := x.cfg.boost[t.field] * t.weight
		if x.cfg.flatIDF {
			df := float64(x.df[t.term][t.field])
			b /= math.Log(1 + (float64(x.total)-df+0.5)/(df+0.5))
		}
		q.SetBoost(b)
		return q
	}
	// group makes one disjunction per run of terms for which same holds.
	group := func(same func(a, b queryTerm) bool) query.Query {
		outer := make([]query.Query, 0, len(terms))
		for i := 0; i < len(terms); {
			j := i + 1
			for j < len(terms) && same(terms[j], terms[i]) {
				j++
			}
			if j == i+1 {
				outer = append(outer, clause(terms[i]))
			} else {
				inner := make([]query.Query, j-i)
				for n := range inner {
					inner[n] = clause(terms[i+n])
				}
				outer = append(outer, query.NewDisjunctionQuery(inner))
			}
			i = j
		}
		return query.NewDisjunctionQuery(outer)
	}
	switch x.cfg.structure {
	case flat:
		return group(func(queryTerm, queryTerm) bool { return false })
	case byField:
		slices.SortStableFunc(terms, func(a, b queryTerm) int { return cmp.Compare(a.field, b.field) })
		return group(func(a, b queryTerm) bool { return a.field == b.field })
	default:
		if len(x.analyzers) > 1 { // one analyzer yields terms in word order
			slices.SortStableFunc(terms, func(a, b queryTerm) int { return cmp.Compare(a.pos, b.pos) })
		}
		return group(func(a, b queryTerm) bool { return a.pos == b.pos })
	}
}
