// Package router finds tools for an agent: a Bleve BM25 index answers
// plain-words queries (Index), a ChoiceGraph answers hierarchical paths
// (Graph), and the selection helpers constrain and check the id a model
// picks from the cards it was shown (spec 003 §2.5, §2.6, §3, §5).
//
// Everything here is built from one immutable catalog.Snapshot and is itself
// immutable after construction, so one Router serves concurrent browses; a
// catalog refresh builds a new Router.
package router

import (
	"errors"

	"github.com/quiver-mcp/quiver/catalog"
)

// Errors, matched with errors.Is; the runtime maps them to the wire codes of
// spec 003 §3.4.
var (
	// ErrArgsInvalid: both or neither of query and path, a top_k out of
	// range, an empty query, a bad cursor (ARGS_INVALID).
	ErrArgsInvalid = errors.New("invalid browse arguments")
	// ErrPathInvalid: a path that violates the §3.2 grammar (PATH_INVALID).
	ErrPathInvalid = errors.New("invalid path")
	// ErrPathNotFound: a well-formed path that names no node (PATH_NOT_FOUND).
	ErrPathNotFound = errors.New("path not found")
)

// Top-k bounds of a browse.
const (
	DefaultTopK = 10
	MaxTopK     = 50
)

// Hit is one routed item with its relevance score (higher is better).
type Hit struct {
	Item  *catalog.Item
	Score float64
	// LowConfidence marks a hit of the never-empty fallback (fallback.go):
	// no word of the query matched it as written.
	LowConfidence bool
}
