package firewall

import (
	"strings"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/choicecard/tokens"
)

// segMax bounds the text handed to the cl100k encoder in one call. The
// encoder's pre-tokeniser backtracks and its merge loop is quadratic in the
// length of a single piece (32 KiB of one letter takes seconds), so every count
// here is a sum over segments of at most segMax bytes.
const segMax = 1024

// meter counts and cuts cl100k_base tokens with bounded work per byte.
//
// Text is split into segments of at most segMax bytes, preferably right after a
// newline that is followed by a non-space character, right before a space
// that follows a non-space character, or right before ASCII punctuation that
// follows an ASCII letter or digit. cl100k_base pre-tokenisation never joins
// text across such a point, so for ordinary text the sum of the segment counts
// equals the count of the whole; only a run of segMax bytes with neither kind
// of boundary (a huge word, a long whitespace run) is cut at an arbitrary rune
// boundary, which can shift the count by a token or so per cut.
type meter struct{ c *tokens.Counter }

// nextSegment returns the length of the first segment of s.
func nextSegment(s string) int {
	if len(s) <= segMax {
		return len(s)
	}
	w := s[:segMax]
	// After a newline followed by a non-whitespace byte.
	for i := len(w) - 1; i > 0; i-- {
		if w[i-1] == '\n' && !isSpaceByte(s[i]) {
			return i
		}
	}
	// Before a space that follows a non-space byte.
	for i := len(w) - 1; i > 0; i-- {
		if s[i] == ' ' && !isSpaceByte(s[i-1]) {
			return i
		}
	}
	// Before ASCII punctuation that follows an ASCII letter or digit: a
	// letter or digit run always ends a piece there.
	for i := len(w) - 1; i > 0; i-- {
		if isASCIIPunct(s[i]) && isASCIIAlnum(s[i-1]) {
			return i
		}
	}
	// Any rune boundary.
	i := segMax
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		return segMax
	}
	return i
}

func isASCIIAlnum(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

func isASCIIPunct(b byte) bool {
	return b > ' ' && b < 0x7f && !isASCIIAlnum(b)
}

func isSpaceByte(b byte) bool {
	return b == ' ' || b == '\n' || b == '\t' || b == '\r' || b == '\v' || b == '\f'
}

// count returns the token count of s.
func (m meter) count(s string) int {
	n := 0
	for len(s) > 0 {
		k := nextSegment(s)
		n += m.c.Count(s[:k])
		s = s[k:]
	}
	return n
}

// cut returns the longest prefix of s (as measured segment by segment) that
// holds at most max tokens, its token count, and whether anything was cut.
// Work is proportional to the prefix, not to s.
func (m meter) cut(s string, max int) (string, int, bool) {
	if max <= 0 {
		return "", 0, len(s) > 0
	}
	used, pos := 0, 0
	for pos < len(s) {
		k := nextSegment(s[pos:])
		seg := s[pos : pos+k]
		n := m.c.Count(seg)
		if used+n <= max {
			used += n
			pos += k
			continue
		}
		p, pn := m.cutSegment(seg, max-used)
		return s[:pos] + p, used + pn, true
	}
	return s, used, false
}

// cutSegment returns a prefix of seg (one segment) with at most room tokens.
func (m meter) cutSegment(seg string, room int) (string, int) {
	ids := m.c.Encode(seg)
	for r := min(room, len(ids)); r > 0; r-- {
		p := m.c.DecodeValid(ids[:r])
		if !strings.HasPrefix(seg, p) {
			// Invalid UTF-8 decodes differently from the input; fall back
			// to a byte prefix of the same length.
			p = validPrefix(seg[:min(len(p), len(seg))])
		}
		if p == "" {
			continue
		}
		if n := m.c.Count(p); n <= room {
			return p, n
		}
	}
	return "", 0
}

// validPrefix drops a trailing incomplete UTF-8 sequence from s.
func validPrefix(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			return s
		}
	}
	return s
}
