package tokens

import (
	"unicode"
	"unicode/utf8"
)

// The fast path of Count for valid UTF-8 text that is not ASCII: the same
// scanner as asciiPiece with the pattern's Unicode classes, which regexp2
// tests with Go's own tables (\p{L} = unicode.IsLetter, \p{N} =
// unicode.IsNumber, \s = unicode.IsSpace), and counted in runes as regexp2
// matches them. The contractions stay ASCII: no rune above 0x7f matches
// (?i:'s|'t|'re|'ve|'m|'ll|'d) case-insensitively in regexp2 (checked over
// every rune). Invalid UTF-8 is counted as the encoder counts it: Count
// replaces each invalid byte with U+FFFD (replaceInvalid) and comes here.

// countUTF8 returns the cl100k_base token count of s and true when s is
// valid UTF-8; 0 and false otherwise.
func (c *Counter) countUTF8(s string) (int, bool) {
	if !utf8.ValidString(s) {
		return 0, false
	}
	n := 0
	for len(s) > 0 {
		k := unicodePiece(s)
		n += c.pieceTokens(s[:k])
		s = s[k:]
	}
	return n, true
}

func isOtherRune(r rune) bool {
	return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r)
}

// letterRunes returns the end of the run of letters starting at byte i.
func letterRunes(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) {
			break
		}
		i += n
	}
	return i
}

// unicodePiece is asciiPiece on valid UTF-8 text.
func unicodePiece(s string) int {
	if k := contractionLen(s); k > 0 {
		return k
	}
	r0, n0 := utf8.DecodeRuneInString(s)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if unicode.IsLetter(r0) {
		return letterRunes(s, n0)
	}
	if r0 != '\r' && r0 != '\n' && !unicode.IsNumber(r0) && len(s) > n0 {
		if r1, n1 := utf8.DecodeRuneInString(s[n0:]); unicode.IsLetter(r1) {
			return letterRunes(s, n0+n1)
		}
	}
	// \p{N}{1,3}
	if unicode.IsNumber(r0) {
		i := n0
		for k := 1; k < 3 && i < len(s); k++ {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsNumber(r) {
				break
			}
			i += n
		}
		return i
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	i := 0
	if r0 == ' ' && len(s) > 1 {
		i = 1
	}
	if r, n := utf8.DecodeRuneInString(s[i:]); isOtherRune(r) {
		j := i + n
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !isOtherRune(r) {
				break
			}
			j += n
		}
		for j < len(s) && isCRLF(s[j]) {
			j++
		}
		return j
	}
	// r0 is whitespace from here on: the run, its last CR or LF, and
	// \s+(?!\S) as in asciiPiece (the run's last rune, not byte).
	end, last, lastCRLF := n0, 0, -1
	if isCRLF(s[0]) {
		lastCRLF = 0
	}
	for end < len(s) {
		r, n := utf8.DecodeRuneInString(s[end:])
		if !unicode.IsSpace(r) {
			break
		}
		if r == '\r' || r == '\n' {
			lastCRLF = end
		}
		last = end
		end += n
	}
	if lastCRLF >= 0 {
		return lastCRLF + 1
	}
	if end == len(s) {
		return end
	}
	if last > 0 {
		return last
	}
	return end
}

// contractionLen returns the length of the contraction s starts with
// ((?i:'s|'t|'re|'ve|'m|'ll|'d), the first alternative that matches), or 0.
func contractionLen(s string) int {
	if len(s) < 2 || s[0] != '\'' || !isLetterASCII(s[1]) {
		return 0
	}
	switch s[1] | 0x20 {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if len(s) >= 3 && isLetterASCII(s[2]) && s[2]|0x20 == 'e' {
			return 3
		}
	case 'l':
		if len(s) >= 3 && isLetterASCII(s[2]) && s[2]|0x20 == 'l' {
			return 3
		}
	}
	return 0
}
