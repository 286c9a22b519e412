package router_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
)

// walletFleet has a tool that no word of "cash" queries matches lexically
// but whose words are near "cash" in the word vectors.
var walletFleet = []catalog.ToolDef{
	{Server: "wallet", Name: "retrieveBalance", Description: "Return the money left in the account."},
	{Server: "weather", Name: "get_forecast", Description: "Weather forecast for a city."},
	{Server: "weather", Name: "get_alerts", Description: "Weather alerts for a region."},
	{Server: "git", Name: "git_commit", Description: "Record changes to the repository."},
}

func denseIndex(t *testing.T, defs []catalog.ToolDef, w float64) *router.Index {
	t.Helper()
	c := router.DefaultConfig()
	c.DenseWeight, c.DensePC = w, true
	x, err := router.NewIndexConfig(ingest(t, defs), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// TestDenseFirstStage: the dense stage brings a tool the lexical search
// cannot, and never one the caller may not see.
func TestDenseFirstStage(t *testing.T) {
	x := denseIndex(t, walletFleet, 1)
	base := newIndex(t, walletFleet)
	const q = "weather and my cash"
	has := func(hits []router.Hit, server string) bool {
		return slices.ContainsFunc(hits, func(h router.Hit) bool { return h.Item.Server == server })
	}
	hits, err := base.Search(context.Background(), q, 5)
	if err != nil {
		t.Fatal(err)
	}
	if has(hits, "wallet") {
		t.Fatalf("lexical search alone found the wallet: %v", names(hits))
	}
	if hits, err = x.Search(context.Background(), q, 5); err != nil {
		t.Fatal(err)
	}
	if !has(hits, "wallet") || !has(hits, "weather") {
		t.Errorf("dense on: %v, want wallet and weather", names(hits))
	}
	for _, h := range hits {
		if h.LowConfidence {
			t.Errorf("%s marked low confidence in a lexical answer", h.Item.ID)
		}
	}
	noWallet := func(it *catalog.Item) bool { return it.Server != "wallet" }
	if hits, err = x.SearchVisible(context.Background(), q, 5, noWallet); err != nil {
		t.Fatal(err)
	}
	if has(hits, "wallet") || len(hits) == 0 {
		t.Errorf("wallet hidden: %v", names(hits))
	}
	onlyGit := func(it *catalog.Item) bool { return it.Server == "git" }
	if hits, _ = x.SearchVisible(context.Background(), q, 5, onlyGit); len(hits) != 1 || hits[0].Item.Server != "git" {
		t.Errorf("only git visible: %v", names(hits))
	}
}

// TestDenseOffUnchanged: a zero weight builds no vectors and ranks as the
// default index does.
func TestDenseOffUnchanged(t *testing.T) {
	x := denseIndex(t, memoryFleet, 0)
	base := newIndex(t, memoryFleet)
	for _, q := range []string{"knowledge graph observations", "weather forecast", "remember facts about a person"} {
		a, _ := x.Search(context.Background(), q, 5)
		b, _ := base.Search(context.Background(), q, 5)
		if !slices.Equal(names(a), names(b)) {
			t.Errorf("%q: %v, default %v", q, names(a), names(b))
		}
	}
}

// TestDenseHiddenCandidates: with the dense stage on, when every lexical
// candidate is hidden, a visible lexical match further down still counts
// (the dense stage's own guesses do not take its place).
func TestDenseHiddenCandidates(t *testing.T) {
	var defs []catalog.ToolDef
	for i := range 150 {
		defs = append(defs, catalog.ToolDef{Server: "hidden", Name: "invoice_tool_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Description: "Create an invoice. Invoice invoice invoice."})
	}
	defs = append(defs,
		catalog.ToolDef{Server: "shown", Name: "billing", Description: "Send an invoice to a customer, with a long description that dilutes the match of its single invoice word."},
		catalog.ToolDef{Server: "shown", Name: "payment_receipt", Description: "Record a payment receipt for an order."})
	c := router.DefaultConfig()
	c.DenseWeight, c.DensePC, c.DenseTop = 1, true, 1 // the dense stage brings one tool
	x, err := router.NewIndexConfig(ingest(t, defs), c)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	hits, err := x.SearchVisible(context.Background(), "invoice", 5, func(it *catalog.Item) bool { return it.Server == "shown" })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(hits, func(h router.Hit) bool { return h.Item.UpstreamName == "billing" && !h.LowConfidence }) {
		t.Fatalf("hits %v, want billing among them", names(hits))
	}
}

// FuzzSearchDense: with the dense stage on, any query either fails as
// invalid arguments (blank) or gets between 1 and k hits, none hidden, all
// fallback hits or none.
func FuzzSearchDense(f *testing.F) {
	for _, s := range []string{"weather and my cash", "remember facts about a person", "GitHub commits", "qqqq", "\xff\xfe", "the of and"} {
		f.Add(s, 3)
	}
	c := router.DefaultConfig()
	c.DenseWeight, c.DensePC = 1, true
	idx, err := router.NewIndexConfig(ingest(f, slices.Concat(memoryFleet, walletFleet)), c)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	noWallet := func(it *catalog.Item) bool { return it.Server != "wallet" && it.Server != "memory" }
	f.Fuzz(func(t *testing.T, q string, k int) {
		k = 1 + (k&0x7fffffff)%router.MaxTopK
		hits, err := idx.SearchVisible(context.Background(), q, k, noWallet)
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
			if !noWallet(h.Item) {
				t.Fatalf("%q: hidden %s", q, h.Item.ID)
			}
			if h.LowConfidence != hits[0].LowConfidence {
				t.Fatalf("%q: mixed lexical and fallback hits", q)
			}
		}
	})
}
