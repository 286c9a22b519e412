package router

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/toolid"
)

// Options configure a Router.
type Options struct {
	// Cards builds internal-node cards. Required.
	Cards *choicecard.Builder
	// MaxChildren bounds the children of a ChoiceGraph node (default 20).
	MaxChildren int
}

// Router answers browses over one catalog snapshot: a query Index and a
// navigation Graph for each kind of primitive, so tool, resource and prompt
// cards never mix (spec 003 §9.4).
type Router struct {
	kinds map[toolid.Kind]*kindRouter
	once  sync.Once
}

type kindRouter struct {
	index *Index
	graph *Graph
}

// New builds the indexes and graphs of every kind present in snap.
func New(ctx context.Context, snap *catalog.Snapshot, opts Options) (*Router, error) {
	r := &Router{kinds: map[toolid.Kind]*kindRouter{}}
	for _, kind := range []toolid.Kind{toolid.KindTool, toolid.KindResource, toolid.KindPrompt} {
		if err := ctx.Err(); err != nil {
			r.Close()
			return nil, err
		}
		items := snap.Items(kind)
		if len(items) == 0 {
			continue
		}
		idx, err := NewIndex(items, IndexOptions{})
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("%s index: %w", kind, err)
		}
		g, err := NewGraph(items, GraphOptions(opts))
		if err != nil {
			idx.Close()
			r.Close()
			return nil, fmt.Errorf("%s graph: %w", kind, err)
		}
		r.kinds[kind] = &kindRouter{index: idx, graph: g}
	}
	return r, nil
}

// Route answers a plain-words query with at most k cards of one kind that
// visible accepts (nil: all), scored and ordered by score desc, then id asc
// (§2.5). low reports that no word of the query matched as written and the
// cards come from the never-empty fallback (Index.Search).
func (r *Router) Route(ctx context.Context, kind toolid.Kind, query string, k int, visible Visible) (cards []choicecard.Card, low bool, err error) {
	if r == nil {
		return nil, false, nil
	}
	kr, ok := r.kinds[kind]
	if !ok {
		if k < 1 || k > MaxTopK {
			return nil, false, fmt.Errorf("%w: top_k %d outside 1..%d", ErrArgsInvalid, k, MaxTopK)
		}
		if strings.TrimSpace(query) == "" {
			return nil, false, fmt.Errorf("%w: empty query", ErrArgsInvalid)
		}
		return []choicecard.Card{}, false, nil
	}
	hits, err := kr.index.SearchVisible(ctx, query, k, visible)
	if err != nil {
		return nil, false, err
	}
	cards = make([]choicecard.Card, len(hits))
	for i, h := range hits {
		c := h.Item.Card
		c.Score = h.Score
		cards[i] = c
		low = low || h.LowConfidence
	}
	return cards, low, nil
}

// Browse lists the children of a ChoiceGraph node of one kind (§3).
func (r *Router) Browse(kind toolid.Kind, path string, k int, cursor string) (Page, error) {
	return r.BrowseFiltered(kind, path, k, cursor, nil)
}

// BrowseFiltered is Browse for a caller who sees only the items see
// accepts (nil: all); see Graph.BrowseFiltered.
func (r *Router) BrowseFiltered(kind toolid.Kind, path string, k int, cursor string, see func(*catalog.Item) bool) (Page, error) {
	if r == nil {
		return Page{}, fmt.Errorf("%w: the catalog is empty", ErrPathNotFound)
	}
	kr, ok := r.kinds[kind]
	if !ok {
		if _, err := ParsePath(path); err != nil {
			return Page{}, err
		}
		if path == "/" {
			return Page{Cards: []choicecard.Card{}}, nil
		}
		return Page{}, fmt.Errorf("%w: %s", ErrPathNotFound, path)
	}
	return kr.graph.BrowseFiltered(path, k, cursor, see)
}

// PathOf returns the leaf path of the item of one kind with catalog id id.
func (r *Router) PathOf(kind toolid.Kind, id string) (string, bool) {
	if r == nil {
		return "", false
	}
	kr, ok := r.kinds[kind]
	if !ok {
		return "", false
	}
	return kr.graph.PathOf(id)
}

// Close releases the indexes. Calls after Close fail cleanly.
func (r *Router) Close() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		for _, kr := range r.kinds {
			kr.index.Close()
		}
	})
}
