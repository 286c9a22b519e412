package router_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/benchmarks"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/toolid"
)

// smallCatalog is a synthetic fleet where each plain query has one right
// answer.
var smallCatalog = []catalog.ToolDef{
	{Server: "math", Name: "add", Description: "Add two numbers and return the sum.",
		InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
	{Server: "math", Name: "multiply", Description: "Multiply two numbers.",
		InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)},
	{Server: "calc", Name: "get-sum", Description: "Returns the total of a list of values.",
		InputSchema: []byte(`{"type":"object","properties":{"values":{"type":"array","items":{"type":"number"}}}}`)},
	{Server: "bank", Name: "retrieveBalance", Description: "Fetch the current account balance of a customer.",
		InputSchema: []byte(`{"type":"object","properties":{"accountId":{"type":"string","description":"The customer account"}}}`)},
	{Server: "bank", Name: "transferFunds", Description: "Move money between two accounts.",
		InputSchema: []byte(`{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"},"amount":{"type":"number"}}}`)},
	{Server: "Yahoo Finance", Name: "get_stock_price", Description: "Latest quote for a ticker symbol.",
		InputSchema: []byte(`{"type":"object","properties":{"symbol":{"type":"string","description":"Ticker symbol, e.g. AAPL"}}}`)},
	{Server: "weather", Name: "get_forecast", Description: "Weather forecast for a city.",
		InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)},
	{Server: "docs", Name: "Search Documentation", Description: "Full-text search over the product manual.",
		InputSchema: []byte(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
	{Server: "azure", Name: "appconfig_kv_get", Description: "Gets key-values in a configuration store.",
		InputSchema: []byte(`{"type":"object","properties":{"key":{"type":"string"}}}`)},
	{Server: "filesystem", Name: "write_file", Description: "Create or overwrite a file with the given content.",
		InputSchema: []byte(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)},
	// twins: same text on two servers, for tie-breaking by id
	{Server: "twin-b", Name: "echo", Description: "Echo the message back."},
	{Server: "twin-a", Name: "echo", Description: "Echo the message back."},
}

func ingest(t testing.TB, defs []catalog.ToolDef) []*catalog.Item {
	t.Helper()
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := catalog.Ingest(catalog.Source{Tools: defs}, catalog.Options{Cards: cards})
	if err != nil {
		t.Fatal(err)
	}
	return snap.Items(toolid.KindTool)
}

func newSmall(t testing.TB, opts router.IndexOptions) *router.Index {
	t.Helper()
	x, err := router.NewIndex(ingest(t, smallCatalog), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func TestSearchFindsPlainQueries(t *testing.T) {
	for _, opts := range []router.IndexOptions{{}, {ServerWeight: -1}} {
		x := newSmall(t, opts)
		for _, tc := range []struct {
			query string
			want  []string // acceptable upstream names for the first hit
		}{
			{"add two numbers", []string{"add", "get-sum"}},
			{"sum of numbers", []string{"add", "get-sum"}},
			{"retrieve balance", []string{"retrieveBalance"}},
			{"what is my account balance", []string{"retrieveBalance"}},
			{"RetrieveBalance", []string{"retrieveBalance"}},
			{"stock price of Apple", []string{"get_stock_price"}},
			{"get stock price", []string{"get_stock_price"}},
			{"yahoo finance quote", []string{"get_stock_price"}},
			{"search the documentation", []string{"Search Documentation"}},
			{"weather forecast for Paris", []string{"get_forecast"}},
			{"transfer money", []string{"transferFunds"}},
			{"app config key values", []string{"appconfig_kv_get"}},
			{"save the report to /root/markdown/report.md file", []string{"write_file"}},
		} {
			hits, err := x.Search(context.Background(), tc.query, 3)
			if err != nil {
				t.Fatalf("%q: %v", tc.query, err)
			}
			if len(hits) == 0 || !slices.Contains(tc.want, hits[0].Item.UpstreamName) {
				t.Errorf("opts %+v: %q: first hit %v, want one of %v", opts, tc.query, names(hits), tc.want)
			}
		}
	}
}

func names(hits []router.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, fmt.Sprintf("%s/%s(%.3f)", h.Item.Server, h.Item.UpstreamName, h.Score))
	}
	return out
}

func TestSearchOrdering(t *testing.T) {
	for _, opts := range []router.IndexOptions{{}, {ServerWeight: -1}} {
		x := newSmall(t, opts)
		for _, q := range []string{"echo message", "numbers", "get", "account balance money", "file"} {
			for _, k := range []int{1, 2, 5, router.MaxTopK} {
				hits, err := x.Search(context.Background(), q, k)
				if err != nil {
					t.Fatal(err)
				}
				if len(hits) > k {
					t.Fatalf("%q k=%d: %d hits", q, k, len(hits))
				}
				for i := 1; i < len(hits); i++ {
					a, b := hits[i-1], hits[i]
					if a.Score < b.Score || (a.Score == b.Score && a.Item.ID >= b.Item.ID) {
						t.Fatalf("%q k=%d: hits %d and %d out of order: %v", q, k, i-1, i, names(hits))
					}
				}
			}
		}
		// identical tools on two servers tie; the smaller id comes first
		hits, err := x.Search(context.Background(), "echo message back", 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 2 || hits[0].Score != hits[1].Score || hits[0].Item.Server != "twin-a" {
			t.Fatalf("tie: got %v, want twin-a then twin-b with equal scores", names(hits))
		}
		// k=1 keeps the smaller id of a tie too
		one, err := x.Search(context.Background(), "echo message back", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(one) != 1 || one[0].Item.ID != hits[0].Item.ID {
			t.Fatalf("tie at k=1: got %v, want %s", names(one), hits[0].Item.ID)
		}
	}
}

func TestSearchArgs(t *testing.T) {
	x := newSmall(t, router.IndexOptions{})
	for _, tc := range []struct {
		query string
		k     int
		err   error
	}{
		{"add", 0, router.ErrArgsInvalid},
		{"add", -1, router.ErrArgsInvalid},
		{"add", router.MaxTopK + 1, router.ErrArgsInvalid},
		{"", 5, router.ErrArgsInvalid},
		{"   \t\n", 5, router.ErrArgsInvalid},
		{"add", 1, nil},
		{"add", router.MaxTopK, nil},
		{"the of and", 5, nil},       // only stop words: fallback hits, no error
		{"zzyzx qwertyuiop", 5, nil}, // unknown words: fallback hits, no error
		{"!!! ???", 5, nil},          // no words at all: fallback hits
	} {
		hits, err := x.Search(context.Background(), tc.query, tc.k)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("Search(%q, %d): err %v, want %v", tc.query, tc.k, err, tc.err)
		}
		if err != nil && hits != nil {
			t.Errorf("Search(%q, %d): hits with an error", tc.query, tc.k)
		}
	}
	// A non-empty query never gets zero hits from a non-empty index; hits
	// of the fallback are marked low-confidence, lexical ones are not.
	for _, q := range []string{"the of and", "zzyzx qwertyuiop", "!!! ???"} {
		hits, _ := x.Search(context.Background(), q, 5)
		if len(hits) != 5 || slices.ContainsFunc(hits, func(h router.Hit) bool { return !h.LowConfidence }) {
			t.Errorf("%q: %v, want 5 low-confidence hits", q, names(hits))
		}
	}
	if hits, _ := x.Search(context.Background(), "add", 5); len(hits) == 0 || hits[0].LowConfidence {
		t.Errorf("add: %v, want lexical hits", names(hits))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.Search(ctx, "add", 5); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestIndexClose(t *testing.T) {
	x, err := router.NewIndex(ingest(t, smallCatalog), router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != len(smallCatalog) {
		t.Fatalf("Len %d, want %d", x.Len(), len(smallCatalog))
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := x.Search(context.Background(), "add", 5); !errors.Is(err, router.ErrClosed) {
		t.Fatalf("Search after Close: %v", err)
	}
}

func TestNewIndexEmptyAndDuplicate(t *testing.T) {
	x, err := router.NewIndex(nil, router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if hits, err := x.Search(context.Background(), "anything", 5); err != nil || len(hits) != 0 {
		t.Fatalf("empty index: %v %v", hits, err)
	}
	items := ingest(t, smallCatalog[:2])
	if _, err := router.NewIndex([]*catalog.Item{items[0], items[1], items[0]}, router.IndexOptions{}); err == nil {
		t.Fatal("duplicate ids: want an error")
	}
}

func TestSearchConcurrent(t *testing.T) {
	x := newSmall(t, router.IndexOptions{})
	queries := []string{"add two numbers", "retrieve balance", "stock price", "weather", "echo", "file"}
	want := make([][]router.Hit, len(queries))
	for i, q := range queries {
		var err error
		if want[i], err = x.Search(context.Background(), q, 5); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 50 {
				i := (g + n) % len(queries)
				got, err := x.Search(context.Background(), queries[i], 5)
				if err != nil {
					errs <- err
					return
				}
				if !slices.EqualFunc(got, want[i], func(a, b router.Hit) bool { return a.Item == b.Item && a.Score == b.Score }) {
					errs <- fmt.Errorf("%q: %v, want %v", queries[i], names(got), names(want[i]))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSearchDuringClose: Close waits for searches in flight; searches that
// start later fail with ErrClosed, never with a panic.
func TestSearchDuringClose(t *testing.T) {
	x, err := router.NewIndex(ingest(t, smallCatalog), router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := x.Search(context.Background(), "add numbers", 5); err != nil && !errors.Is(err, router.ErrClosed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	if err := x.Close(); err != nil {
		t.Error(err)
	}
	wg.Wait()
}

// Recall floors on the real catalog: the figures reached (README-route.md)
// minus 0.01.
var recallFloor = map[string]map[int]float64{
	"azure_mcp":    {1: 0.667, 5: 0.936, 10: 0.962},
	"livemcpbench": {1: 0.124, 5: 0.361, 10: 0.395},
}

func TestRecallRegression(t *testing.T) {
	items, qs := loadReal(t)
	x, err := router.NewIndex(items, router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, src := range benchmarks.Sources(qs) {
		floor, ok := recallFloor[src]
		if !ok {
			continue
		}
		var set []benchmarks.Query
		for _, q := range qs {
			if q.Source == src {
				set = append(set, q)
			}
		}
		// searches run on every core: the race detector slows them down
		ranked := make([][]router.Hit, len(set))
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(set); i += workers {
					hits, err := x.Search(context.Background(), set[i].Text, 10)
					if err != nil {
						t.Error(err)
						return
					}
					ranked[i] = hits
				}
			}()
		}
		wg.Wait()
		s := benchmarks.Score(set, ranked, []int{1, 5, 10})
		for _, k := range []int{1, 5, 10} {
			if s.Recall[k] < floor[k] {
				t.Errorf("%s recall@%d = %.3f, below the floor %.3f", src, k, s.Recall[k], floor[k])
			}
		}
		t.Logf("%s: %d qids, recall@1 %.3f @5 %.3f @10 %.3f, MRR %.3f", src, s.QIDs, s.Recall[1], s.Recall[5], s.Recall[10], s.MRR)
	}
}

// TestSearchTiesAcrossTheCut: many identical tools tie; whatever bleve's
// internal order (it varies between builds), the result is the tied tools
// with the smallest ids, in id order, and strong tools are never displaced.
func TestSearchTiesAcrossTheCut(t *testing.T) {
	var defs []catalog.ToolDef
	for i := range 150 {
		defs = append(defs, catalog.ToolDef{Server: fmt.Sprintf("s%03d", (i*7)%150), Name: "echo", Description: "Echo the message back."})
	}
	defs = append(defs,
		catalog.ToolDef{Server: "strong", Name: "echo_message", Description: "Echo a message; echo it back as message."},
		catalog.ToolDef{Server: "strong2", Name: "message_echo", Description: "Message echo: echo the message."},
	)
	items := ingest(t, defs)
	var tied []string
	for _, it := range items {
		if it.UpstreamName == "echo" {
			tied = append(tied, it.ID)
		}
	}
	slices.Sort(tied)
	for _, opts := range []router.IndexOptions{{}, {ServerWeight: -1}} {
		var first []router.Hit
		for build := range 3 {
			x, err := router.NewIndex(items, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []int{1, 5, 20} {
				hits, err := x.Search(context.Background(), "echo message", k)
				if err != nil {
					t.Fatal(err)
				}
				if len(hits) != k {
					t.Fatalf("k=%d: %d hits", k, len(hits))
				}
				var got []string
				for _, h := range hits {
					if h.Item.UpstreamName == "echo" {
						got = append(got, h.Item.ID)
					}
				}
				if want := tied[:len(got)]; !slices.Equal(got, want) {
					t.Fatalf("opts %+v build %d k=%d: tied hits %v, want the smallest ids %v", opts, build, k, got, want)
				}
				if k >= 5 && (len(got) != k-2 || hits[0].Item.Server == "" || !strings.HasPrefix(hits[0].Item.Server, "strong")) {
					t.Fatalf("opts %+v k=%d: strong tools displaced: %v", opts, k, names(hits))
				}
				if k == 20 {
					if first == nil {
						first = hits
					} else if !slices.EqualFunc(first, hits, func(a, b router.Hit) bool { return a.Item == b.Item && a.Score == b.Score }) {
						t.Fatalf("build %d differs: %v vs %v", build, names(hits), names(first))
					}
				}
			}
			x.Close()
		}
	}
}

func TestSearchResourcesAndPrompts(t *testing.T) {
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := catalog.Ingest(catalog.Source{
		Tools:     smallCatalog,
		Resources: []catalog.ResourceDef{{Server: "docs", URI: "file:///manual/installGuide.md", Name: "installGuide", Description: "How to install the product."}},
		Prompts:   []catalog.PromptDef{{Server: "docs", Name: "summarize_release_notes", Description: "Summarize the release notes.", Arguments: []catalog.PromptArgument{{Name: "version"}}}},
	}, catalog.Options{Cards: cards})
	if err != nil {
		t.Fatal(err)
	}
	x, err := router.NewIndex(snap.All(), router.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for q, kind := range map[string]toolid.Kind{"install guide": toolid.KindResource, "summarize release notes": toolid.KindPrompt} {
		hits, err := x.Search(context.Background(), q, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Item.Kind != kind {
			t.Errorf("%q: %v, want a %s first", q, names(hits), kind)
		}
	}
}
