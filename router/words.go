package router

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Character classes of the word splitter.
const (
	clNone  = iota // separator
	clLower        // lower-case letter
	clUpper        // upper- or title-case letter
	clDigit        // digit
	clOther        // letter without case (CJK, ...)
)

func charClass(r rune) int {
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z':
			return clLower
		case 'A' <= r && r <= 'Z':
			return clUpper
		case '0' <= r && r <= '9':
			return clDigit
		}
		return clNone
	}
	switch {
	case unicode.IsLower(r):
		return clLower
	case unicode.IsUpper(r), unicode.IsTitle(r):
		return clUpper
	case unicode.IsDigit(r), unicode.IsNumber(r):
		return clDigit
	case unicode.IsLetter(r), unicode.Is(unicode.Mn, r):
		return clOther
	}
	return clNone
}

// eachRun calls fn for every run of letters and digits in s (separators
// are everything else: '_', '-', '.', '/', ':', spaces, ...), with the
// run's parts: the run split at camelCase, acronym and (unless keepDigits)
// letter/digit boundaries:
//
//	retrieveBalance -> retrieve Balance
//	HTTPServerV2    -> HTTP Server V 2
//	mysql           -> mysql
//
// parts is reused between calls.
func eachRun(s string, keepDigits bool, fn func(run string, parts []string)) {
	var parts []string
	start := -1
	prev := clNone
	partStart := 0
	flush := func(end int) {
		if start < 0 {
			return
		}
		parts = append(parts, s[partStart:end])
		fn(s[start:end], parts)
		parts = parts[:0]
		start = -1
	}
	for i, r := range s {
		c := charClass(r)
		if c == clNone {
			flush(i)
			prev = clNone
			continue
		}
		if start < 0 {
			start, partStart = i, i
			prev = c
			continue
		}
		cut := false
		switch {
		case prev == clLower && c == clUpper: // fooBar
			cut = true
		case prev == clUpper && c == clUpper: // HTTPServer: cut before the 'S' of "Se"
			if j := i + utf8.RuneLen(r); j < len(s) {
				if nr, _ := utf8.DecodeRuneInString(s[j:]); charClass(nr) == clLower {
					cut = true
				}
			}
		case !keepDigits && (prev == clDigit) != (c == clDigit):
			cut = true
		}
		if cut {
			parts = append(parts, s[partStart:i])
			partStart = i
		}
		prev = c
	}
	flush(len(s))
}

// splitWords appends the words of s to buf, separated by spaces: the parts
// of every run (see eachRun) and, when a run has several parts and
// joinRuns is set, the whole run as well, so that "MySQL" finds both
// "mysql" and "sql". Case is kept: the analyzers lower-case.
func splitWords(buf []byte, s string, keepDigits, joinRuns bool) []byte {
	eachRun(s, keepDigits, func(run string, parts []string) {
		for _, p := range parts {
			if len(buf) > 0 {
				buf = append(buf, ' ')
			}
			buf = append(buf, p...)
		}
		if joinRuns && len(parts) > 1 {
			buf = append(buf, ' ')
			buf = append(buf, run...)
		}
	})
	return buf
}

// vocabulary counts the lower-cased words of a catalog, for decompounding
// names ("appconfig" -> "app config") and queries.
type vocabulary struct {
	// all counts words in any indexed text.
	all map[string]int
	// prose counts words in descriptions: a word common in prose is a word
	// in its own right and is never decompounded ("generate" is not
	// "gene rate").
	prose map[string]int
}

// Decompounding bounds: a compound is minCompound to maxCompound lower-case
// ASCII letters, seen in descriptions fewer than maxProse times, made of at
// most maxParts parts; a part is at least minPart bytes and a known word
// (seen at least minPartCount times), and every part is at least partRatio
// times as common as the compound itself.
const (
	minCompound  = 6
	maxCompound  = 32
	maxProse     = 10
	maxParts     = 4
	minPart      = 3
	minPartCount = 2
	partRatio    = 2
)

func newVocabulary() *vocabulary {
	return &vocabulary{all: map[string]int{}, prose: map[string]int{}}
}

// add counts the words of text; prose marks description text.
func (v *vocabulary) add(text string, prose bool) {
	eachRun(text, false, func(run string, parts []string) {
		for _, p := range parts {
			w := lowerASCII(p)
			v.all[w]++
			if prose {
				v.prose[w]++
			}
		}
		if len(parts) > 1 {
			v.all[lowerASCII(run)]++
		}
	})
}

// decompound splits a lower-case word into known words ("appconfig": app,
// config), or returns nil. Fewest parts win, then the split whose rarest
// part is most common. v may be nil (decompounding off).
func (v *vocabulary) decompound(w string) []string {
	if v == nil || len(w) < minCompound || len(w) > maxCompound || v.prose[w] >= maxProse {
		return nil
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return nil
		}
	}
	best, rarest := v.splitParts(w, maxParts)
	if best == nil || rarest < partRatio*v.all[w] {
		return nil
	}
	return best
}

// split returns w itself when it is a known word, or else its best split
// into at most n known words; with the count of the rarest part.
func (v *vocabulary) split(w string, n int) ([]string, int) {
	if c := v.all[w]; c >= minPartCount && len(w) >= minPart {
		return []string{w}, c
	}
	return v.splitParts(w, n)
}

// splitParts returns the best split of w into 2 to n known words and the
// count of its rarest part, or nil.
func (v *vocabulary) splitParts(w string, n int) ([]string, int) {
	if n < 2 {
		return nil, 0
	}
	var best []string
	rarest := 0
	for i := minPart; i <= len(w)-minPart; i++ {
		head := w[:i]
		hc := v.all[head]
		if hc < minPartCount {
			continue
		}
		rest, rc := v.split(w[i:], n-1)
		if rest == nil {
			continue
		}
		m := min(hc, rc)
		if best == nil || 1+len(rest) < len(best) || (1+len(rest) == len(best) && m > rarest) {
			best = append([]string{head}, rest...)
			rarest = m
		}
	}
	return best, rarest
}

// lowerASCII lower-cases s, allocating only when s has upper case.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(s)
		}
	}
	return s
}
