package router

import (
	"fmt"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router/internal/wordvec"
)

// field is one indexed field of an item. Each is a separate BM25 field with
// its own length normalisation and boost.
type field int

const (
	fieldName   field = iota // name and title, split into words
	fieldServer              // server name, namespace and card tags, split into words
	fieldDesc                // description
	fieldParam               // parameter names and titles (top level and one nested level)
	fieldPDesc               // parameter descriptions
	numFields
)

var fieldNames = [numFields]string{"name", "server", "desc", "param", "pdesc"}

// Analyzer names registered in every index mapping. All share bleve's
// unicode tokenizer; they differ in their token filters.
const (
	anEnglish = en.AnalyzerName // possessive, lower, English stop words, porter
	anPlain   = "q_plain"       // lower
	anStem    = "q_stem"        // lower, porter (no stop words)
	anStop    = "q_stop"        // lower, English stop words (no stemming)
	anLight   = "q_light"       // possessive, lower, English stop words, plural stemmer
	anSnow    = "q_snow"        // possessive, lower, English stop words, snowball
)

// customAnalyzers are the token filters of the analyzers defined here.
var customAnalyzers = []struct {
	name    string
	filters []string
}{
	{anPlain, []string{lowercase.Name}},
	{anStem, []string{lowercase.Name, porter.Name}},
	{anStop, []string{lowercase.Name, en.StopName}},
	{anLight, []string{en.PossessiveName, lowercase.Name, en.StopName, en.PluralStemmerName}},
	{anSnow, []string{en.PossessiveName, lowercase.Name, en.StopName, en.SnowballStemmerName}},
}

// structure is the shape of the bleve query built from (field, term)
// clauses. bleve multiplies the sum of a disjunction's matching clauses by
// a coordination factor (matching clauses / clauses), so the shape decides
// which kind of coverage is rewarded.
type structure int

const (
	// byWord: a disjunction over query words of disjunctions over fields;
	// the outer factor rewards items that match many distinct query words.
	byWord structure = iota
	// byField: a disjunction over fields of disjunctions over terms.
	byField
	// flat: one disjunction of every (field, term) clause.
	flat
)

// config holds every tuning knob of the index. defaultConfig holds the
// values chosen by measurement on the labelled queries (see
// benchmarks/README-route.md); router's tuning harness (tune_test.go)
// varies them.
type config struct {
	analyzer [numFields]string
	boost    [numFields]float64
	// structure is the shape of the query.
	structure structure
	// joinRuns also indexes and queries a camelCase run whole ("MySQL":
	// my, sql, mysql).
	joinRuns bool
	// decompound adds the known words a name word is made of
	// ("appconfig": app, config), on the index and the query side.
	decompound bool
	// keepDigits leaves letter/digit runs ("ec2") whole when splitting.
	keepDigits bool
	// serverWeight blends server evidence into tool scores:
	// score' = score + serverWeight * serverScore, where serverScore is the
	// mean of the serverTop best candidate scores of the tool's server.
	serverWeight float64
	serverTop    int
	// candidates is how many bleve hits are re-ranked (at least k).
	candidates int
	// nested indexes parameters one level down (object properties and
	// properties of array items).
	nested bool

	// Measured and left off (see README-route.md).

	// noSplit leaves identifiers to bleve's tokenizer, which keeps
	// snake_case and camelCase runs whole (the baseline of the ablation).
	noSplit bool
	// queryStop drops conversational words of task-style queries.
	queryStop bool
	// flatIDF divides each term's boost by its idf: bleve's BM25 multiplies
	// the term score by a query weight that holds idf again.
	flatIDF bool
	// enums indexes string enum values of parameters with their names.
	enums bool
	// combined also puts server and name words into the description field.
	combined bool
	// abbrev matches prefixes of a query word of at least abbrev bytes
	// against name words ("configuration" finds "config") with weight
	// abbrevWeight; 0 is off.
	abbrev       int
	abbrevWeight float64

	// Query expansion (expand.go), measured by the protocol of
	// benchmarks/routing-protocol.md.

	// synWeight weighs the curated synonyms of synonyms.go; 0 is off.
	synWeight float64
	// assocWeight weighs the description-term -> name-term associations
	// learned from the catalog at build time (assocTop per term, pairs
	// seen in at least assocMin tools); 0 is off.
	assocWeight        float64
	assocTop, assocMin int
	// prfDocs > 0 turns on RM3-style pseudo-relevance feedback: the
	// prfTerms best terms of the top prfDocs hits join the query as one
	// more group, weighted by prfWeight.
	prfDocs, prfTerms int
	prfWeight         float64
	// rrf fuses the query's and its alternatives' rankings by reciprocal
	// rank instead of a weighted sum of max-normalised scores.
	rrf bool
	// segWeight > 0 also routes each clause of a task-style query on its
	// own (segments) and adds segWeight times its best normalised clause
	// score to a hit's normalised score.
	segWeight float64
	// wnWeight weighs the WordNet-derived alternatives (wordnet.go):
	// synonyms 1, derived forms wnDer, hypernyms wnHyp; 0 is off.
	wnWeight, wnDer, wnHyp float64
	// gapOnly expands only the query terms no field holds.
	gapOnly bool
	// maxDF > 0 drops a (field, term) clause whose term is in more than
	// this share of the items' field: it barely tells items apart and its
	// postings dominate the cost of a search.
	maxDF float64
	// The semantic signal (semantic.go), measured by the same protocol.

	// denseWeight > 0 turns on the dense stage over word vectors, fused
	// with BM25 with this weight; denseTop tools enter from it; denseRRF
	// fuses by reciprocal rank; denseRerank only re-scores the BM25
	// candidates; densePC removes the tools' common component.
	denseWeight           float64
	denseTop              int
	denseRRF, denseRerank bool
	densePC               bool
	// denseSeg also scores each clause of a task-style query (segments)
	// and keeps a tool's best cosine.
	denseSeg bool
	// denseIDF also weighs each word by its idf over the catalog.
	denseIDF bool
	// vecWeight > 0 expands each query term with its vecTop nearest
	// catalog terms by word-vector cosine (at least vecMin), weighted by
	// that cosine, fused as the other expansions with weight vecWeight.
	vecWeight float64
	vecTop    int
	vecMin    float64
	// vectors loads the word-vector table (wordvec.Load) for the two
	// above. It is nil by default so that the 2.4 MB table is not linked
	// into the binary while both are off; the tuning harness sets it.
	vectors func() (*wordvec.Table, error)
}

func defaultConfig() config {
	c := config{
		boost: [numFields]float64{
			fieldName:   1,
			fieldServer: 1.5,
			fieldDesc:   1,
			fieldParam:  0.5,
			fieldPDesc:  0.5,
		},
		structure:    byWord,
		joinRuns:     true,
		decompound:   true,
		serverWeight: 1,
		serverTop:    3,
		candidates:   100,
		nested:       true,
		denseTop:     100,
	}
	for f := range c.analyzer {
		c.analyzer[f] = anLight
	}
	return c
}

func newMapping(cfg config) (*mapping.IndexMappingImpl, error) {
	m := bleve.NewIndexMapping()
	m.ScoringModel = index.BM25Scoring
	for _, a := range customAnalyzers {
		err := m.AddCustomAnalyzer(a.name, map[string]any{
			"type":          custom.Name,
			"tokenizer":     unicode.Name,
			"token_filters": a.filters,
		})
		if err != nil {
			return nil, fmt.Errorf("router: analyzer %s: %w", a.name, err)
		}
	}
	dm := bleve.NewDocumentStaticMapping()
	for f := range numFields {
		fm := mapping.NewTextFieldMapping()
		fm.Analyzer = cfg.analyzer[f]
		fm.Store = false
		fm.IncludeInAll = false
		fm.IncludeTermVectors = false
		fm.DocValues = false
		dm.AddFieldMappingsAt(fieldNames[f], fm)
	}
	m.DefaultMapping = dm
	m.DefaultAnalyzer = cfg.analyzer[fieldDesc]
	m.StoreDynamic = false
	m.IndexDynamic = false
	m.DocValuesDynamic = false
	return m, nil
}

// itemText is the raw text of an item per field, before word splitting.
type itemText [numFields][]string

// textOf collects the raw text of an item per field.
func textOf(it *catalog.Item, cfg *config) itemText {
	var t itemText
	switch {
	case it.Tool != nil:
		d := it.Tool
		t[fieldName] = append(t[fieldName], d.Name, d.Title)
		if s, ok := d.Annotations["title"].(string); ok {
			t[fieldName] = append(t[fieldName], s)
		}
		t[fieldDesc] = append(t[fieldDesc], d.Description)
		t[fieldParam], t[fieldPDesc] = schemaText(it.InputSchema(), cfg)
	case it.Resource != nil:
		r := it.Resource
		t[fieldName] = append(t[fieldName], r.Name, r.Title, r.URI)
		t[fieldDesc] = append(t[fieldDesc], r.Description)
	case it.Prompt != nil:
		p := it.Prompt
		t[fieldName] = append(t[fieldName], p.Name, p.Title)
		t[fieldDesc] = append(t[fieldDesc], p.Description)
		for _, a := range p.Arguments {
			t[fieldParam] = append(t[fieldParam], a.Name, a.Title)
			t[fieldPDesc] = append(t[fieldPDesc], a.Description)
		}
	default:
		t[fieldName] = append(t[fieldName], it.UpstreamName)
	}
	t[fieldServer] = append(t[fieldServer], it.Server)
	if !strings.EqualFold(it.Namespace, it.Server) {
		t[fieldServer] = append(t[fieldServer], it.Namespace)
	}
	t[fieldServer] = append(t[fieldServer], it.Card.Tags...)
	if cfg.combined {
		d := append(append([]string(nil), t[fieldServer]...), t[fieldName]...)
		t[fieldDesc] = append(d, t[fieldDesc]...)
	}
	return t
}

// schemaText returns the parameter names (and titles) and descriptions of
// a decoded input schema: the top-level properties and, with cfg.nested,
// the properties of object parameters and of arrays of objects one level
// down. Never the raw schema JSON: its keywords are noise to a query.
func schemaText(schema map[string]any, cfg *config) (names, descs []string) {
	var walk func(props map[string]any, depth int)
	walk = func(props map[string]any, depth int) {
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			names = append(names, k)
			p, _ := props[k].(map[string]any)
			if p == nil {
				continue
			}
			if s, ok := p["title"].(string); ok {
				names = append(names, s)
			}
			if s, ok := p["description"].(string); ok {
				descs = append(descs, s)
			}
			if cfg.enums {
				if vals, ok := p["enum"].([]any); ok {
					for _, v := range vals {
						if s, ok := v.(string); ok {
							names = append(names, s)
						}
					}
				}
			}
			if depth > 0 || !cfg.nested {
				continue
			}
			if sub, ok := p["properties"].(map[string]any); ok {
				walk(sub, depth+1)
			}
			if items, ok := p["items"].(map[string]any); ok {
				if sub, ok := items["properties"].(map[string]any); ok {
					walk(sub, depth+1)
				}
			}
		}
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		walk(props, 0)
	}
	return names, descs
}

// identField reports whether a field holds identifiers (names), whose runs
// are also indexed whole and decompounded.
func identField(f field) bool {
	return f == fieldName || f == fieldServer || f == fieldParam
}

// docBuilder turns item text into documents. It memoizes
// decompounding, since clones and big servers repeat name words.
type docBuilder struct {
	cfg  *config
	voc  *vocabulary // nil when decompounding is off
	memo map[string][]string
	buf  []byte
}

// doc returns the document of one item: a string of words per field.
func (b *docBuilder) doc(t *itemText) [numFields]string {
	var doc [numFields]string
	for f := range numFields {
		b.buf = b.buf[:0]
		for _, s := range t[f] {
			if b.cfg.noSplit {
				b.emit(s)
				continue
			}
			if !identField(f) {
				b.buf = splitWords(b.buf, s, b.cfg.keepDigits, b.cfg.joinRuns)
				continue
			}
			eachRun(s, b.cfg.keepDigits, b.run)
		}
		doc[f] = string(b.buf)
	}
	return doc
}

// run appends the words of one identifier run to b.buf.
func (b *docBuilder) run(run string, parts []string) {
	for _, p := range parts {
		b.emit(p)
	}
	if b.cfg.joinRuns && len(parts) > 1 {
		b.emit(run)
	}
	if b.voc == nil {
		return
	}
	for _, p := range parts {
		for _, w := range b.decompound(p) {
			b.emit(w)
		}
	}
	if len(parts) > 1 {
		for _, w := range b.decompound(run) {
			b.emit(w)
		}
	}
}

func (b *docBuilder) emit(w string) {
	if len(b.buf) > 0 {
		b.buf = append(b.buf, ' ')
	}
	b.buf = append(b.buf, w...)
}

func (b *docBuilder) decompound(w string) []string {
	w = lowerASCII(w)
	if d, ok := b.memo[w]; ok {
		return d
	}
	d := b.voc.decompound(w)
	b.memo[w] = d
	return d
}
