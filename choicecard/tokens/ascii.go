package tokens

import "math"

// The fast path of Count: ASCII text is split into pre-tokenisation pieces by
// a scanner equivalent to cl100kPattern, and each piece is byte-pair merged on
// the ranks directly, without the regexp2 engine, the []rune copy of the text
// and the token slice that tiktoken-go's EncodeOrdinary builds. A count is then
// allocation-free for pieces of up to 63 bytes, and the result is the same
// number (FuzzCountASCII and TestCountASCIIMatchesEncoder hold the two paths
// against each other). Text with any byte >= 0x80 takes the Unicode scanner
// (unicode.go), where the pattern's classes are Unicode categories.
//
// In ASCII the pattern's classes are: \p{L} = [A-Za-z], \p{N} = [0-9], and \s
// = [\t\n\v\f\r ] (regexp2 tests \s with unicode.IsSpace). Every byte belongs
// to some alternative, so the pieces cover the text with no gap.

// countASCII returns the cl100k_base token count of s and true when s is
// ASCII; 0 and false otherwise.
func (c *Counter) countASCII(s string) (int, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return 0, false
		}
	}
	n := 0
	for len(s) > 0 {
		k := asciiPiece(s)
		n += c.pieceTokens(s[:k])
		s = s[k:]
	}
	return n, true
}

func isLetterASCII(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }
func isDigitASCII(b byte) bool  { return b >= '0' && b <= '9' }
func isSpaceASCII(b byte) bool  { return b == ' ' || (b >= '\t' && b <= '\r') }
func isCRLF(b byte) bool        { return b == '\r' || b == '\n' }

// isOtherASCII is [^\s\p{L}\p{N}] on ASCII.
func isOtherASCII(b byte) bool { return !isSpaceASCII(b) && !isLetterASCII(b) && !isDigitASCII(b) }

// letterRun returns the end of the run of letters starting at i.
func letterRun(s string, i int) int {
	for i < len(s) && isLetterASCII(s[i]) {
		i++
	}
	return i
}

// asciiPiece returns the length of the first piece of the non-empty ASCII
// text s, taking the alternatives of cl100kPattern in order as the
// backtracking matcher does:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} |
//	 ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
func asciiPiece(s string) int {
	b := s[0]
	// (?i:'s|'t|'re|'ve|'m|'ll|'d): the first alternative that matches wins,
	// even when a letter follows ("'sa" is "'s", "a").
	if k := contractionLen(s); k > 0 {
		return k
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetterASCII(b) {
		return letterRun(s, 1)
	}
	if !isCRLF(b) && !isDigitASCII(b) && len(s) >= 2 && isLetterASCII(s[1]) {
		return letterRun(s, 2)
	}
	// \p{N}{1,3}
	if isDigitASCII(b) {
		n := 1
		for n < 3 && n < len(s) && isDigitASCII(s[n]) {
			n++
		}
		return n
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	i := 0
	if b == ' ' && len(s) >= 2 {
		i = 1
	}
	if isOtherASCII(s[i]) {
		j := i + 1
		for j < len(s) && isOtherASCII(s[j]) {
			j++
		}
		for j < len(s) && isCRLF(s[j]) {
			j++
		}
		return j
	}
	// b is whitespace from here on. \s*[\r\n]+ ends after the last CR or LF
	// of the whitespace run (the greedy \s* gives back up to it).
	end := 1
	for end < len(s) && isSpaceASCII(s[end]) {
		end++
	}
	for k := end - 1; k >= 0; k-- {
		if isCRLF(s[k]) {
			return k + 1
		}
	}
	// \s+(?!\S): the whole run at the end of the text, else the run but its
	// last byte (which a following non-space would otherwise join).
	if end == len(s) {
		return end
	}
	if end > 1 {
		return end - 1
	}
	// \s+
	return end
}

// pieceTokens is the number of tokens of one pre-tokenisation piece.
func (c *Counter) pieceTokens(piece string) int {
	if len(piece) <= 1 {
		return len(piece) // every single byte is a rank
	}
	if _, ok := c.ranks[piece]; ok {
		return 1
	}
	if len(piece) >= longPiece {
		return c.mergeCountLong(piece)
	}
	return c.mergeCount(piece)
}

// bpePart is a boundary of the byte-pair merge: where a token starts and the
// rank of the pair that would merge it with the next token (noRank if none).
type bpePart struct{ start, rank int }

const noRank = math.MaxInt

// mergeCount byte-pair merges piece on the ranks and returns the number of
// tokens left. It is the merge tiktoken runs (the lowest rank first, the
// leftmost of equal ranks), counting instead of collecting the tokens.
func (c *Counter) mergeCount(piece string) int {
	var buf [64]bpePart
	parts := buf[:0]
	if len(piece)+1 > len(buf) {
		parts = make([]bpePart, 0, len(piece)+1)
	}
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, bpePart{i, noRank})
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = c.spanRank(piece, parts, i, 0)
	}
	for len(parts) > 1 {
		low, at := noRank, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < low {
				low, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = c.spanRank(piece, parts, at, 1)
		if at > 0 {
			parts[at-1].rank = c.spanRank(piece, parts, at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}

// spanRank is the rank of the bytes from parts[i] to parts[i+skip+2], or
// noRank when they are not a token or run past the end.
func (c *Counter) spanRank(piece string, parts []bpePart, i, skip int) int {
	if i+skip+2 >= len(parts) {
		return noRank
	}
	if r, ok := c.ranks[piece[parts[i].start:parts[i+skip+2].start]]; ok {
		return r
	}
	return noRank
}
