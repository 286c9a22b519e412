package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/quiver-mcp/quiver/catalog"
)

// ErrClosed is returned by Search on a closed Index.
var ErrClosed = errors.New("router index is closed")

// IndexOptions configure NewIndex. The zero value is the measured default.
type IndexOptions struct {
	// ServerWeight sets how much a tool's score is lifted by the best
	// scores of its server's tools (server-level evidence: multi-step tasks
	// often need several tools of one server). 0 keeps the default (1), a
	// negative value turns it off.
	ServerWeight float64
}

// Index is an in-memory BM25 index over catalog items (postings.go: the
// router's own postings, scored as bleve's BM25 scores them). It ranks
// items for plain-words queries. Search is safe for concurrent use; Close
// releases the index.
//
// Each item is indexed as five fields: its name, its server (server name,
// namespace, card tags), its description, its parameter names and its
// parameter descriptions. Identifiers are split into words (snake_case,
// kebab-case, camelCase, dots, digits), camelCase runs are also kept whole,
// and name words made of known words are decompounded ("appconfig": app,
// config) with a vocabulary drawn from the catalog itself. A query is
// split the same way and matched word by word against every field with
// per-field boosts; the best candidates are then lifted by the scores of
// their server's best tools. A query that matches nothing the caller may
// see is answered by the fallback of fallback.go, its hits marked
// LowConfidence. The query-expansion candidates of expand.go are measured
// (benchmarks/routing-protocol.md) and off by default.
type Index struct {
	cfg   config
	items map[string]*catalog.Item

	// analyzers holds each distinct field analyzer once, with the fields
	// it serves: query words are analyzed once per analyzer.
	analyzers []queryAnalyzer
	// df holds each term's document frequency per field, so that query
	// terms absent from a field cost nothing.
	df    map[string][numFields]uint32
	total uint64
	// voc decompounds query words (nil when off); names holds the
	// lower-cased words of item names, for abbreviations.
	voc   *vocabulary
	names map[string]bool
	// syn and assoc are the query expansions (expand.go), nil when off;
	// descAn analyzes description text (feedback terms).
	syn, assoc     expansions
	descAn, stemAn analysis.Analyzer
	// wnOnce builds wn, the WordNet alternatives (wordnet.go), at their
	// first use: reading the table takes ~40 ms, which an index build
	// does not pay when no query needs it.
	wnOnce  sync.Once
	wn      expansions
	wnBuild func() expansions

	// dense is the semantic signal (semantic.go), nil when off.
	dense *dense

	mu     sync.RWMutex // guards post against Close during Search
	post   *postings
	closed bool
}

// wordnet returns the WordNet alternatives, built at the first call.
func (x *Index) wordnet() expansions {
	x.wnOnce.Do(func() { x.wn = x.wnBuild() })
	return x.wn
}

type queryAnalyzer struct {
	an     analysis.Analyzer
	fields []field
}

// NewIndex builds an in-memory BM25 index over items in one batch. Items
// are not copied and must not be modified afterwards; their ids must be
// distinct.
func NewIndex(items []*catalog.Item, opts IndexOptions) (*Index, error) {
	cfg := defaultConfig()
	switch {
	case opts.ServerWeight < 0:
		cfg.serverWeight = 0
	case opts.ServerWeight > 0:
		cfg.serverWeight = opts.ServerWeight
	}
	return newIndex(items, cfg)
}

func newIndex(items []*catalog.Item, cfg config) (*Index, error) {
	if cfg.serverTop < 1 {
		cfg.serverTop = 1
	}
	m, err := newMapping(cfg)
	if err != nil {
		return nil, err
	}
	x := &Index{cfg: cfg, items: make(map[string]*catalog.Item, len(items))}
	if cfg.abbrev > 0 {
		x.names = map[string]bool{}
	}

	// Gather text and the catalog's vocabulary first: decompounding needs
	// the whole vocabulary.
	texts := make([]itemText, 0, len(items))
	kept := make([]*catalog.Item, 0, len(items))
	voc := newVocabulary()
	for _, it := range items {
		if it == nil {
			continue
		}
		if _, dup := x.items[it.ID]; dup {
			return nil, fmt.Errorf("router: item id %q listed twice", it.ID)
		}
		x.items[it.ID] = it
		t := textOf(it, &x.cfg)
		if cfg.decompound {
			for f := range numFields {
				for _, s := range t[f] {
					voc.add(s, f == fieldDesc)
				}
			}
		}
		if x.names != nil {
			for _, s := range t[fieldName] {
				eachRun(s, cfg.keepDigits, func(_ string, parts []string) {
					for _, p := range parts {
						x.names[lowerASCII(p)] = true
					}
				})
			}
		}
		texts = append(texts, t)
		kept = append(kept, it)
	}
	if cfg.decompound {
		x.voc = voc
	}

	x.descAn = m.AnalyzerNamed(cfg.analyzer[fieldDesc])
	x.stemAn = m.AnalyzerNamed(anStem)
	var fieldAn [numFields]analysis.Analyzer
	for f := range numFields {
		if fieldAn[f] = m.AnalyzerNamed(cfg.analyzer[f]); fieldAn[f] == nil {
			return nil, fmt.Errorf("router: no analyzer %q", cfg.analyzer[f])
		}
	}
	nameAn := fieldAn[fieldName]
	if x.descAn == nil || x.stemAn == nil {
		return nil, fmt.Errorf("router: no analyzer %q", cfg.analyzer[fieldDesc])
	}
	var ab *assocBuilder
	if cfg.assocWeight > 0 {
		ab = newAssocBuilder()
	}
	// Documents are numbered in id order: ties in score then need no
	// string comparison.
	order := make([]int, len(kept))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(kept[a].ID, kept[b].ID) })
	db := &docBuilder{cfg: &x.cfg, voc: x.voc, memo: map[string][]string{}}
	pb := newPostingsBuilder(len(kept), fieldAn)
	// The raw text is not needed past its document unless the semantic
	// signal builds tool vectors from it below.
	keepTexts := cfg.denseWeight > 0 || cfg.vecWeight > 0
	for _, i := range order {
		doc := db.doc(&texts[i])
		if !keepTexts {
			texts[i] = itemText{}
		}
		if ab != nil {
			ab.addTool(analyzeTerms(x.descAn, doc[fieldDesc]), analyzeTerms(nameAn, doc[fieldName]))
		}
		pb.add(kept[i].ID, &doc)
	}
	if !keepTexts {
		texts = nil
	}
	if ab != nil {
		x.assoc = ab.build(max(cfg.assocTop, 1), max(cfg.assocMin, 1))
	}
	x.post = pb.finish()
	x.total = uint64(len(kept))

	x.df = make(map[string][numFields]uint32, len(x.post.terms))
	for t := range x.post.terms {
		x.df[t] = x.post.df(t)
	}
	known := func(t string) bool { _, ok := x.df[t]; return ok }
	if cfg.denseWeight > 0 || cfg.vecWeight > 0 {
		if cfg.vectors == nil {
			return nil, errors.New("router: word vectors not linked")
		}
		tab, err := cfg.vectors()
		if err != nil {
			return nil, fmt.Errorf("router: word vectors: %w", err)
		}
		x.dense = newDense(tab, kept, texts, x.voc, cfg.densePC, cfg.denseIDF)
		if cfg.vecWeight > 0 {
			x.dense.catalogWords(x.df)
		}
	}
	// The curated and WordNet alternatives serve the fallback always, and
	// the lexical search only when their weights are set.
	x.syn = synonymExpansions(x.descAn, known)
	der, hyp := 1.0, 0.0
	if cfg.wnWeight > 0 {
		der, hyp = cfg.wnDer, cfg.wnHyp
	}
	x.wnBuild = func() expansions { return wordnetExpansions(der, hyp, known) }
	seen := map[string]int{}
	for f := range numFields {
		if cfg.boost[f] <= 0 {
			continue
		}
		name := cfg.analyzer[f]
		if i, found := seen[name]; found {
			x.analyzers[i].fields = append(x.analyzers[i].fields, f)
			continue
		}
		an := m.AnalyzerNamed(name)
		if an == nil {
			return nil, fmt.Errorf("router: no analyzer %q", name)
		}
		seen[name] = len(x.analyzers)
		x.analyzers = append(x.analyzers, queryAnalyzer{an: an, fields: []field{f}})
	}
	return x, nil
}

// Len returns the number of indexed items.
func (x *Index) Len() int { return len(x.items) }

// Search returns the k best items for a plain-words query, ordered by score
// descending, then id ascending (spec 003 §2.5). k must be in 1..MaxTopK
// and the query must not be blank; otherwise the error matches
// ErrArgsInvalid. A query whose words match nothing still gets hits from
// the fallback (fallback.go), marked LowConfidence; only an empty catalog
// returns none. Search honours ctx's cancellation.
func (x *Index) Search(ctx context.Context, q string, k int) ([]Hit, error) {
	return x.SearchVisible(ctx, q, k, nil)
}

// SearchVisible is Search over the items visible accepts (nil: all): hidden
// items are dropped before ranking, in the lexical search and in every
// fallback stage alike, so they neither show nor crowd visible ones out;
// it returns no hits only when no item is visible.
func (x *Index) SearchVisible(ctx context.Context, q string, k int, visible Visible) ([]Hit, error) {
	if k < 1 || k > MaxTopK {
		return nil, fmt.Errorf("top_k %d out of range 1..%d: %w", k, MaxTopK, ErrArgsInvalid)
	}
	if strings.TrimSpace(q) == "" {
		return nil, fmt.Errorf("empty query: %w", ErrArgsInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	terms, gaps := x.queryTerms(x.queryWords(q))

	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, ErrClosed
	}
	if bq := x.compose(terms); bq != nil {
		hits, err := x.lexical(ctx, q, k, bq, terms, gaps, visible)
		if err != nil || len(hits) > 0 {
			return hits, err
		}
	}
	words := make([]string, 0, len(terms)+len(gaps))
	for _, t := range slices.Concat(terms, gaps) {
		if !slices.Contains(words, t.term) {
			words = append(words, t.term)
		}
	}
	return x.fallback(ctx, q, words, k, visible)
}

// lexical is the BM25 search of the query's own words (and the measured
// expansions that are on).
func (x *Index) lexical(ctx context.Context, q string, k int, bq query.Query, terms, gaps []queryTerm, visible Visible) ([]Hit, error) {
	size := k
	if x.cfg.serverWeight > 0 || visible != nil {
		size = max(k, x.cfg.candidates)
	}
	hits, err := x.top(ctx, bq, size, k)
	if err != nil {
		return nil, err
	}
	if x.cfg.segWeight > 0 {
		if segs := segments(q); segs != nil {
			var seghits []search.DocumentMatchCollection
			for _, s := range segs {
				st, _ := x.queryTerms(x.queryWords(s))
				sq := x.compose(st)
				if sq == nil {
					continue
				}
				h, err := x.top(ctx, sq, size, k)
				if err != nil {
					return nil, err
				}
				seghits = append(seghits, h)
			}
			hits = x.fuseSegments(hits, seghits)
		}
	}
	var alt []queryTerm
	if x.cfg.synWeight > 0 || x.assoc != nil || x.cfg.wnWeight > 0 || x.cfg.vecWeight > 0 {
		if x.cfg.gapOnly {
			alt = x.expand(gaps, terms)
		} else {
			alt = x.expand(terms, terms)
		}
	}
	if x.cfg.prfDocs > 0 && len(hits) > 0 {
		alt = append(alt, x.feedback(hits, terms)...)
	}
	if aq := x.compose(alt); aq != nil {
		althits, err := x.top(ctx, aq, size, k)
		if err != nil {
			return nil, err
		}
		hits = x.fuse(hits, althits)
	}
	if x.dense != nil && x.cfg.denseWeight > 0 {
		if hits, err = x.denseStage(ctx, q, bq, hits, size, k, visible); err != nil {
			return nil, err
		}
	}
	out := x.rank(hits, k, visible)
	if len(out) == 0 && visible != nil && len(hits) >= size {
		// Every candidate was hidden, and more items match beyond the
		// cut: rank them all rather than fall back past visible matches.
		all, err := x.top(ctx, bq, len(x.items), k)
		if err != nil {
			return nil, err
		}
		out = x.rank(all, k, visible)
	}
	return out, nil
}

// top returns the best hits of q, at most size and at least k of them
// when that many match, ordered by score descending, then id ascending.
// Which items make a cut must not depend on the order items were indexed
// in, so a group of hits tied across position size is dropped whole when
// at least k hits remain, and kept in id order up to size otherwise.
func (x *Index) top(ctx context.Context, q query.Query, size, k int) (search.DocumentMatchCollection, error) {
	res, err := x.post.search(ctx, q, size+1)
	if err != nil {
		return nil, fmt.Errorf("router: search: %w", err)
	}
	if len(res) > size {
		last := res[size].score
		cut := size
		for cut > 0 && res[cut-1].score == last {
			cut--
		}
		if cut < k {
			cut = size
		}
		res = res[:cut]
	}
	dms := make([]search.DocumentMatch, len(res))
	out := make(search.DocumentMatchCollection, len(res))
	for i, r := range res {
		dms[i] = search.DocumentMatch{ID: x.post.ids[r.doc], Score: r.score}
		out[i] = &dms[i]
	}
	return out, nil
}

// rank turns hits (in score order) of visible items into the k best
// Hits, ordered by score descending, then id ascending, lifting each by the
// mean of its server's serverTop best scores.
func (x *Index) rank(dms search.DocumentMatchCollection, k int, visible Visible) []Hit {
	hits := make([]Hit, 0, len(dms))
	for _, dm := range dms {
		if it := x.items[dm.ID]; it != nil && (visible == nil || visible(it)) {
			hits = append(hits, Hit{Item: it, Score: dm.Score})
		}
	}
	sortHits(hits) // ties in id order
	if w := x.cfg.serverWeight; w > 0 && len(hits) > 1 {
		type agg struct {
			sum float64
			n   int
		}
		servers := make(map[string]agg, len(hits))
		for _, h := range hits { // in score order: the first serverTop are the best
			a := servers[h.Item.Namespace]
			if a.n < x.cfg.serverTop {
				a.sum += h.Score
				a.n++
				servers[h.Item.Namespace] = a
			}
		}
		top := float64(x.cfg.serverTop)
		for i := range hits {
			hits[i].Score += w * servers[hits[i].Item.Namespace].sum / top
		}
		sortHits(hits)
	}
	if len(hits) > k {
		hits = hits[:k:k]
	}
	return hits
}

// sortHits orders hits by score descending, then id ascending.
func sortHits(hits []Hit) {
	slices.SortFunc(hits, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Item.ID, b.Item.ID)
	})
}

// Close releases the index. It waits for searches in flight; later
// searches fail with ErrClosed. Close is idempotent.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	x.post = nil
	return nil
}
