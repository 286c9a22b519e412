package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrGlob is matched by the errors of [CompileGlob].
var ErrGlob = errors.New("invalid glob")

// Glob is a compiled glob pattern over whole strings: '*' matches any run
// of characters (':', '/' and '#' included), '?' matches one character,
// and '\' makes the next character literal. Everything else matches
// itself, case-sensitively. Matching takes time linear in the product of
// the lengths at worst, never exponential.
type Glob struct {
	pattern string
	toks    []globTok
	literal bool
}

type globTok struct {
	kind byte // 'l' literal rune, '*' star, '?' any rune
	r    rune
}

// CompileGlob compiles pattern; a trailing lone '\' or invalid UTF-8 is an
// error.
func CompileGlob(pattern string) (Glob, error) {
	if !utf8.ValidString(pattern) {
		return Glob{}, fmt.Errorf("%w %q: not valid UTF-8", ErrGlob, pattern)
	}
	g := Glob{pattern: pattern, literal: true}
	esc := false
	for _, r := range pattern {
		switch {
		case esc:
			g.toks = append(g.toks, globTok{kind: 'l', r: r})
			esc = false
		case r == '\\':
			esc = true
			g.literal = false
		case r == '*':
			// Collapse runs of stars.
			if n := len(g.toks); n == 0 || g.toks[n-1].kind != '*' {
				g.toks = append(g.toks, globTok{kind: '*'})
			}
			g.literal = false
		case r == '?':
			g.toks = append(g.toks, globTok{kind: '?'})
			g.literal = false
		default:
			g.toks = append(g.toks, globTok{kind: 'l', r: r})
		}
	}
	if esc {
		return Glob{}, fmt.Errorf("%w %q: ends with a lone '\\'", ErrGlob, pattern)
	}
	return g, nil
}

// QuoteGlob returns the pattern that matches s and nothing else.
func QuoteGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '*' || r == '?' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// MustGlob is CompileGlob for patterns known to be valid; it panics
// otherwise.
func MustGlob(pattern string) Glob {
	g, err := CompileGlob(pattern)
	if err != nil {
		panic(err)
	}
	return g
}

// String returns the pattern.
func (g Glob) String() string { return g.pattern }

// Match reports whether s matches the whole pattern.
func (g Glob) Match(s string) bool {
	if g.literal {
		return s == g.pattern
	}
	// Classic two-pointer matching with backtracking to the last star,
	// over the runes of s decoded in place (an invalid byte is one
	// U+FFFD, as in []rune(s)): a policy asks this of every item a
	// filtered browse lists, so it must not allocate.
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(s) {
		r, n := utf8.DecodeRuneInString(s[si:])
		if ti < len(g.toks) {
			switch t := g.toks[ti]; t.kind {
			case '*':
				starT, starS = ti, si
				ti++
				continue
			case '?':
				ti++
				si += n
				continue
			default:
				if t.r == r {
					ti++
					si += n
					continue
				}
			}
		}
		if starT < 0 {
			return false
		}
		_, n = utf8.DecodeRuneInString(s[starS:])
		starS += n
		ti, si = starT+1, starS
	}
	for ti < len(g.toks) && g.toks[ti].kind == '*' {
		ti++
	}
	return ti == len(g.toks)
}

// globSet matches when any of its globs matches; the empty set matches
// nothing (callers treat an absent criterion as "any" before asking), and
// a criterion with no patterns is nil. A filtered browse asks every rule
// about every item it lists, and a rule often names many servers or tools
// literally: those are looked up in a map, the patterns with wildcards
// tried in turn.
type globSet = *globs

type globs struct {
	literal map[string]struct{}
	wild    []Glob
}

func compileGlobs(field string, patterns []string) (globSet, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	gs := &globs{literal: make(map[string]struct{}, len(patterns))}
	for _, p := range patterns {
		g, err := CompileGlob(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		if g.literal {
			gs.literal[g.pattern] = struct{}{}
		} else {
			gs.wild = append(gs.wild, g)
		}
	}
	return gs, nil
}

func (gs *globs) match(s string) bool {
	if _, ok := gs.literal[s]; ok {
		return true
	}
	for _, g := range gs.wild {
		if g.Match(s) {
			return true
		}
	}
	return false
}
