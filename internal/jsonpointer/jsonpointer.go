// Package jsonpointer parses and builds RFC 6901 JSON pointers. It is the one
// implementation behind the firewall's selectors, the document guards and the
// config and policy loaders' error locations.
package jsonpointer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("not an RFC 6901 JSON pointer")

// Parse errors; each wraps ErrSyntax.
var (
	// ErrTooLong: the pointer is longer than the caller's bound.
	ErrTooLong = fmt.Errorf("%w: too long", ErrSyntax)
	// ErrNoSlash: a non-empty pointer must start with "/".
	ErrNoSlash = fmt.Errorf("%w: must be empty or start with \"/\"", ErrSyntax)
	// ErrEscape: "~" not followed by "0" or "1".
	ErrEscape = fmt.Errorf("%w: \"~\" must be followed by 0 or 1", ErrSyntax)
)

// Parse splits pointer p into its unescaped reference tokens: "" is the whole
// document (no tokens), "/a~1b/0" is ["a/b", "0"]. A pointer longer than max
// bytes is refused before it is split. Errors wrap ErrSyntax.
func Parse(p string, max int) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if len(p) > max {
		return nil, ErrTooLong
	}
	if p[0] != '/' {
		return nil, ErrNoSlash
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if !strings.Contains(t, "~") {
			continue
		}
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, ErrEscape
			}
		}
		// ~1 first, then ~0 (RFC 6901 §4), so "~01" stays "~1".
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// Escape escapes one reference token ("~" -> "~0", "/" -> "~1").
func Escape(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// Format joins unescaped reference tokens into a pointer; it inverts Parse.
func Format(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(Escape(t))
	}
	return b.String()
}

// Child appends one unescaped token to pointer p.
func Child(p, tok string) string { return p + "/" + Escape(tok) }

// maxIndexDigits keeps an index within int on every platform quiver builds
// for, and far beyond any array a bounded document can hold.
const maxIndexDigits = 9

// ArrayIndex parses a reference token as an array index: "0", or decimal
// digits without a leading zero. "-" (the element after the last) names
// nothing that can be read, so it is not an index.
func ArrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > maxIndexDigits || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(tok)
	return n, err == nil
}
