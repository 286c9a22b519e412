package guard

import (
	"errors"
	"strconv"
	"strings"
)

// MaxPointerBytes bounds a JSON pointer.
const MaxPointerBytes = 1024

// Pointer errors.
var (
	// ErrPointerSyntax: the pointer is not an RFC 6901 pointer.
	ErrPointerSyntax = errors.New("not an RFC 6901 JSON pointer")
	// ErrPointerNotFound: the pointer is well formed but the document has
	// nothing there.
	ErrPointerNotFound = errors.New("the pointer addresses nothing")
)

// ParsePointer splits an RFC 6901 JSON pointer into its unescaped reference
// tokens: "" is the whole document, "/a~1b/0" is ["a/b", "0"]. "~" must be
// followed by "0" or "1". Errors wrap ErrPointerSyntax.
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if len(p) > MaxPointerBytes {
		return nil, ErrPointerSyntax
	}
	if p[0] != '/' {
		return nil, ErrPointerSyntax
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if !strings.Contains(t, "~") {
			continue
		}
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, ErrPointerSyntax
			}
		}
		// ~1 first, then ~0 (RFC 6901 §4).
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
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
			i, ok := arrayIndex(t)
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

// arrayIndex parses an RFC 6901 array index: "0", or digits without a
// leading zero.
func arrayIndex(t string) (int, bool) {
	if t == "" || len(t) > 10 || (len(t) > 1 && t[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil {
		return 0, false
	}
	return n, true
}
