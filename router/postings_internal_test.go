package router

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/quiver-mcp/quiver/catalog"
)

func postingsIndex(t *testing.T) *Index {
	t.Helper()
	tds := []catalog.ToolDef{
		tool("files", "read_file", "Read a file from disk."),
		tool("files", "write_file", "Write a file to disk."),
		tool("notes", "add_note", "Add a note."),
	}
	// Six clones: equal scores for "clone".
	for i := range 6 {
		tds = append(tds, tool(fmt.Sprintf("twin%d", i), "clone_tool", "A clone."))
	}
	x, err := newIndex(smallItems(t, tds...), defaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func TestPostingsRejectsUnknownQueries(t *testing.T) {
	x := postingsIndex(t)
	ctx := context.Background()
	min2 := query.NewDisjunctionQuery([]query.Query{query.NewTermQuery("file"), query.NewTermQuery("disk")})
	min2.SetMin(2)
	fz := query.NewFuzzyQuery("fil")
	fz.SetField("name")
	fz.SetPrefix(1)
	nofield := query.NewTermQuery("file")
	nofield.SetField("nope")
	for _, q := range []query.Query{query.NewMatchQuery("file"), min2, fz, nofield} {
		if _, err := x.post.search(ctx, q, 10); err == nil {
			t.Errorf("%T: no error", q)
		}
	}
}

func TestPostingsCancelLeavesIndexUsable(t *testing.T) {
	x := postingsIndex(t)
	q := x.buildQuery(x.queryWords("read write file disk note"))
	want, err := x.post.search(context.Background(), q, 10)
	if err != nil || len(want) == 0 {
		t.Fatalf("search: %v, %d hits", err, len(want))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.post.search(ctx, q, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled search: %v", err)
	}
	got, err := x.post.search(context.Background(), q, 10)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a cancelled search: %v %v, want %v", got, err, want)
	}
}

// TestTopTieCut: a group of hits tied across the cut is dropped whole when
// at least k hits remain, and kept in id order up to the cut otherwise.
func TestTopTieCut(t *testing.T) {
	x := postingsIndex(t)
	q := x.buildQuery(x.queryWords("clone"))
	all, err := x.top(context.Background(), q, 100, 1)
	if err != nil || len(all) != 6 {
		t.Fatalf("all: %d hits, %v", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Score != all[0].Score || all[i].ID <= all[i-1].ID {
			t.Fatalf("ties not in id order: %v", all)
		}
	}
	// Six tied hits, a cut at 3: none would remain, so the first 3 by id.
	cut, err := x.top(context.Background(), q, 3, 2)
	if err != nil || len(cut) != 3 || cut[0].ID != all[0].ID || cut[2].ID != all[2].ID {
		t.Fatalf("cut at 3: %v, %v", cut, err)
	}
	// A query where one hit outscores the tied group: the group is dropped.
	q = x.buildQuery(x.queryWords("clone twin0"))
	cut, err = x.top(context.Background(), q, 3, 1)
	if err != nil || len(cut) != 1 {
		t.Fatalf("cut at 3 with k 1: %v, %v", cut, err)
	}
}
