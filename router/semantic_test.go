package router_test

import (
	"context"
	"slices"
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
