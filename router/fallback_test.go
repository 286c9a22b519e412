package router_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
)

// memoryFleet holds a knowledge-graph memory server (tool names of the
// reference MCP memory server, descriptions written here) beside unrelated
// ones.
var memoryFleet = []catalog.ToolDef{
	{Server: "memory", Name: "create_entities", Description: "Create multiple new entities in the knowledge graph."},
	{Server: "memory", Name: "add_observations", Description: "Add new observations to existing entities in the knowledge graph."},
	{Server: "memory", Name: "search_nodes", Description: "Search for nodes in the knowledge graph based on a query."},
	{Server: "weather", Name: "get_forecast", Description: "Weather forecast for a city."},
	{Server: "math", Name: "add", Description: "Add two numbers and return the sum."},
	{Server: "git", Name: "git_commit", Description: "Record changes to the repository."},
}

func newIndex(t *testing.T, defs []catalog.ToolDef) *router.Index {
	t.Helper()
	x, err := router.NewIndex(ingest(t, defs), router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func TestFallbackNeverEmpty(t *testing.T) {
	x := newIndex(t, memoryFleet)
	for _, tc := range []struct {
		query string
		want  string // server/name expected among the hits
		low   bool
	}{
		{"remember facts about a person", "memory/", true},
		{"wether forcast", "weather/get_forecast", true}, // fuzzy terms
		{"remembering things", "memory/", true},          // stem prefix: rememb-, and WordNet's memory
		{"committing my work", "git/git_commit", true},   // stem prefix: commit
		{"qqqq", "", true}, // nothing resembles it: still cards
		{"weather forecast", "weather/get_forecast", false}, // lexical, not a fallback
		{"knowledge graph observations", "memory/add_observations", false},
	} {
		hits, err := x.Search(context.Background(), tc.query, 3)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if len(hits) == 0 {
			t.Errorf("%q: no hits", tc.query)
			continue
		}
		for _, h := range hits {
			if h.LowConfidence != tc.low {
				t.Errorf("%q: %s low confidence %v, want %v", tc.query, h.Item.ID, h.LowConfidence, tc.low)
			}
		}
		if tc.want != "" && !slices.ContainsFunc(hits, func(h router.Hit) bool {
			return strings.HasPrefix(h.Item.Server+"/"+h.Item.UpstreamName, tc.want)
		}) {
			t.Errorf("%q: %v, want %s among them", tc.query, names(hits), tc.want)
		}
	}
}

// TestFallbackVisible: no stage of the search shows an item the caller may
// not see, and a caller who sees one tool gets that one for any query.
func TestFallbackVisible(t *testing.T) {
	x := newIndex(t, memoryFleet)
	noMemory := func(it *catalog.Item) bool { return it.Server != "memory" }
	onlyAdd := func(it *catalog.Item) bool { return it.Server == "math" }
	none := func(*catalog.Item) bool { return false }
	for _, q := range []string{"remember facts about a person", "knowledge graph observations", "wether forcast", "qqqq", "the of and"} {
		hits, err := x.SearchVisible(context.Background(), q, 5, noMemory)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			t.Errorf("%q: no hits while 3 tools are visible", q)
		}
		for _, h := range hits {
			if h.Item.Server == "memory" {
				t.Errorf("%q: hidden %s shown", q, h.Item.ID)
			}
		}
		hits, _ = x.SearchVisible(context.Background(), q, 5, onlyAdd)
		if len(hits) != 1 || hits[0].Item.UpstreamName != "add" {
			t.Errorf("%q with only math visible: %v", q, names(hits))
		}
		if hits, _ := x.SearchVisible(context.Background(), q, 5, none); len(hits) != 0 {
			t.Errorf("%q with nothing visible: %v", q, names(hits))
		}
	}
}

// TestFallbackHiddenCandidates: when every lexical candidate is hidden, a
// visible lexical match further down still wins over the fallback.
func TestFallbackHiddenCandidates(t *testing.T) {
	var defs []catalog.ToolDef
	for i := range 150 {
		defs = append(defs, catalog.ToolDef{Server: "hidden", Name: "invoice_tool_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Description: "Create an invoice. Invoice invoice invoice."})
	}
	defs = append(defs, catalog.ToolDef{Server: "shown", Name: "billing", Description: "Send an invoice to a customer, with a long description that dilutes the match of its single invoice word."})
	x := newIndex(t, defs)
	hits, err := x.SearchVisible(context.Background(), "invoice", 5, func(it *catalog.Item) bool { return it.Server == "shown" })
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Item.Server != "shown" || hits[0].LowConfidence {
		t.Fatalf("hits %v (low %v)", names(hits), len(hits) > 0 && hits[0].LowConfidence)
	}
}

// FuzzSearch: any query either fails as invalid arguments (blank) or gets
// between 1 and k hits, none hidden, all fallback hits or none.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{"remember facts about a person", "wether forcast", "add", "qqqq", "!!! ???", "\xff\xfe", "é" + strings.Repeat("a", 60), "the of and"} {
		f.Add(s, 3)
	}
	idx, err := router.NewIndex(ingest(f, memoryFleet), router.IndexOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	noMemory := func(it *catalog.Item) bool { return it.Server != "memory" }
	f.Fuzz(func(t *testing.T, q string, k int) {
		k = 1 + (k&0x7fffffff)%router.MaxTopK
		hits, err := idx.SearchVisible(context.Background(), q, k, noMemory)
		if strings.TrimSpace(q) == "" {
			if err == nil {
				t.Fatalf("%q: want an error", q)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		if len(hits) == 0 || len(hits) > k {
			t.Fatalf("%q k=%d: %d hits", q, k, len(hits))
		}
		for _, h := range hits {
			if h.Item.Server == "memory" {
				t.Fatalf("%q: hidden %s", q, h.Item.ID)
			}
			if h.LowConfidence != hits[0].LowConfidence {
				t.Fatalf("%q: mixed lexical and fallback hits", q)
			}
		}
	})
}
