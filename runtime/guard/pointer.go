package guard

import (
	"errors"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// MaxPointerBytes bounds a JSON pointer.
const MaxPointerBytes = 1024

// Pointer errors.
var (
	// ErrPointerSyntax: the pointer is not an RFC 6901 pointer.
	ErrPointerSyntax = jsonpointer.ErrSyntax
	// ErrPointerNotFound: the pointer is well formed but the document has
	// nothing there.
	ErrPointerNotFound = errors.New("the pointer addresses nothing")
)

// ParsePointer splits an RFC 6901 JSON pointer into its unescaped reference
// tokens (internal/jsonpointer). Errors wrap ErrPointerSyntax.
func ParsePointer(p string) ([]string, error) {
	return jsonpointer.Parse(p, MaxPointerBytes)
}

// Resolve returns the value the pointer p addresses in doc, a decoded JSON
// value (map[string]any, []any, string, float64, json.Number, bool or nil).
// Array indexes are decimal without leading zeros; "-" (past the end)
// addresses nothing. Errors wrap ErrPointerSyntax or ErrPointerNotFound.
func Resolve(doc any, p string) (any, error) {
	toks, err := ParsePointer(p)
	if err != nil {
		return nil, err
	}
	cur := doc
	for _, t := range toks {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[t]
			if !ok {
				return nil, ErrPointerNotFound
			}
			cur = next
		case []any:
			i, ok := jsonpointer.ArrayIndex(t)
			if !ok || i >= len(v) {
				return nil, ErrPointerNotFound
			}
			cur = v[i]
		default:
			return nil, ErrPointerNotFound
		}
	}
	return cur, nil
}
