package router

import (
	"context"
	"fmt"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/quiver-mcp/quiver/catalog"
)

// reference is a bleve scorch index of the documents an Index holds, built
// as the router built its index before postings.go (the same mapping, one
// batch: one segment). Tests check postings against it; benchmarks compare
// the two.
type reference struct {
	idx bleve.Index
}

func newReference(x *Index, items []*catalog.Item, batch int) (*reference, error) {
	m, err := newMapping(x.cfg)
	if err != nil {
		return nil, err
	}
	idx, err := bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, err
	}
	db := &docBuilder{cfg: &x.cfg, voc: x.voc, memo: map[string][]string{}}
	b := idx.NewBatch()
	for i, it := range items {
		if batch > 0 && i > 0 && i%batch == 0 {
			if err := idx.Batch(b); err != nil {
				return nil, err
			}
			b = idx.NewBatch()
		}
		t := textOf(it, &x.cfg)
		d := db.doc(&t)
		doc := make(map[string]any, numFields)
		for f := range numFields {
			doc[fieldNames[f]] = d[f]
		}
		if err := b.Index(it.ID, doc); err != nil {
			return nil, err
		}
	}
	if err := idx.Batch(b); err != nil {
		return nil, err
	}
	return &reference{idx: idx}, nil
}

// top is Index.top as it was over bleve.
func (r *reference) top(ctx context.Context, q query.Query, size, k int) (search.DocumentMatchCollection, error) {
	req := bleve.NewSearchRequestOptions(q, size+1, 0, false)
	res, err := r.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("router: search: %w", err)
	}
	hits := res.Hits
	if len(hits) <= size {
		return hits, nil
	}
	last := hits[size].Score
	cut := size
	for cut > 0 && hits[cut-1].Score == last {
		cut--
	}
	if cut >= k {
		return hits[:cut], nil
	}
	req = bleve.NewSearchRequestOptions(q, size, 0, false)
	req.SortBy([]string{"-_score", "_id"})
	if res, err = r.idx.SearchInContext(ctx, req); err != nil {
		return nil, fmt.Errorf("router: search: %w", err)
	}
	return res.Hits, nil
}
