package firewall

import (
	"bytes"
	"regexp/syntax"
	"strings"
)

// lineFilter is a cheap necessary condition for a regular expression to match
// a line: the line, lower-cased (ASCII), contains one of the literals. It is
// derived from the expression's syntax tree, so it never rejects a line the
// expression matches; lines it accepts still go through the expression.
type lineFilter struct {
	lits  [][]byte
	lower []byte
}

// newLineFilter derives a filter for pattern, or returns nil when the pattern
// has no usable required literal (then every line is matched directly).
func newLineFilter(pattern string) *lineFilter {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	lits, ok := required(re.Simplify())
	if !ok || len(lits) == 0 || len(lits) > 64 {
		return nil
	}
	f := &lineFilter{}
	for _, l := range lits {
		if l == "" {
			return nil // an empty literal filters nothing
		}
		f.lits = append(f.lits, []byte(l))
	}
	return f
}

// required returns lower-case ASCII literals one of which every match
// contains, or ok false if it cannot tell.
func required(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return nil, false // non-ASCII case folding is not worth modelling
			}
		}
		return []string{strings.ToLower(s)}, true
	case syntax.OpCapture:
		return required(re.Sub[0])
	case syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		// Any child's requirement holds; take the one with the longest
		// shortest literal (the most selective).
		var best []string
		bestLen := 0
		for _, sub := range re.Sub {
			lits, ok := required(sub)
			if !ok {
				continue
			}
			if m := shortest(lits); m > bestLen {
				best, bestLen = lits, m
			}
		}
		return best, best != nil
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			lits, ok := required(sub)
			if !ok {
				return nil, false
			}
			all = append(all, lits...)
		}
		return all, true
	}
	return nil, false
}

func shortest(lits []string) int {
	m := -1
	for _, l := range lits {
		if m < 0 || len(l) < m {
			m = len(l)
		}
	}
	return m
}

// mayMatch reports whether line can match.
func (f *lineFilter) mayMatch(line []byte) bool {
	if f == nil {
		return true
	}
	b := f.lower[:0]
	for _, c := range line {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	// The only non-ASCII runes that case-fold to ASCII letters: the Kelvin
	// sign (k) and the long s (s).
	if bytes.IndexByte(b, 0xE2) >= 0 || bytes.IndexByte(b, 0xC5) >= 0 {
		b = bytes.ReplaceAll(b, []byte("\u212a"), []byte("k"))
		b = bytes.ReplaceAll(b, []byte("\u017f"), []byte("s"))
	}
	f.lower = b
	for _, l := range f.lits {
		if bytes.Contains(b, l) {
			return true
		}
	}
	return false
}
