// Package tokens counts tokens exactly as OpenAI's cl100k_base encoding does,
// fully offline.
//
// The cl100k_base BPE ranks (the file OpenAI publishes as cl100k_base.tiktoken,
// sha256 223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7,
// copied from github.com/pkoukk/tiktoken-go-loader, MIT licence) are embedded
// in the binary, about 1.6 MB; nothing is fetched or cached on disk at run
// time. Only this one encoding is embedded. The
// byte-pair encoder itself is github.com/pkoukk/tiktoken-go, built here from its
// exported low-level constructors (NewCoreBPE, NewTiktoken) so that no
// package-level loader (tiktoken.SetBpeLoader) has to be installed: this package
// keeps no mutable state of its own.
//
// Text is encoded as "ordinary" text: the special-token strings such as
// "<|endoftext|>" are counted as the plain characters they consist of, which is
// what a model sees when such a string appears inside a tool description.
// Invalid UTF-8 is counted as if each invalid byte were U+FFFD.
package tokens

import (
	"bytes"
	_ "embed" // for the embedded BPE ranks
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

	tiktoken "github.com/pkoukk/tiktoken-go"
)

// cl100kBase is the cl100k_base.tiktoken rank file: one "base64(token) rank"
// pair per line. It is read-only.
//
//go:embed cl100k_base.tiktoken
var cl100kBase []byte

// cl100kPattern is the cl100k_base pre-tokenisation regular expression, as
// published with the encoding.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// cl100kRanks is the number of mergeable ranks in cl100k_base.
const cl100kRanks = 100256

// EncodingName is the name of the one encoding this package implements.
const EncodingName = "cl100k_base"

// MaxTokenBytes is the length in bytes of the longest cl100k_base token (a run
// of 128 spaces). A text of n tokens is therefore at most n*MaxTokenBytes bytes
// long, which lets callers bound the work spent on over-long inputs.
const MaxTokenBytes = 128

// ErrBadRanks reports that the embedded rank file could not be parsed. It
// indicates a corrupted build, never bad input.
var ErrBadRanks = errors.New("tokens: malformed cl100k_base rank file")

// Counter encodes, decodes and counts cl100k_base tokens. It is immutable after
// construction and safe for concurrent use by multiple goroutines. Build one
// with CL100K and share it: construction parses ~100k ranks (tens of
// milliseconds), encoding is cheap.
type Counter struct {
	enc   *tiktoken.Tiktoken
	ranks map[string]int // token bytes -> rank, shared with enc; read-only
}

// CL100K builds a Counter for the cl100k_base encoding from the embedded rank
// file. Each call parses the ranks afresh; callers should build one Counter and
// reuse it.
func CL100K() (*Counter, error) {
	ranks, err := parseRanks(cl100kBase)
	if err != nil {
		return nil, err
	}
	special := map[string]int{
		tiktoken.ENDOFTEXT:   100257,
		tiktoken.FIM_PREFIX:  100258,
		tiktoken.FIM_MIDDLE:  100259,
		tiktoken.FIM_SUFFIX:  100260,
		tiktoken.ENDOFPROMPT: 100276,
	}
	core, err := tiktoken.NewCoreBPE(ranks, special, cl100kPattern)
	if err != nil {
		return nil, fmt.Errorf("tokens: building cl100k_base encoder: %w", err)
	}
	specialSet := make(map[string]any, len(special))
	for k := range special {
		specialSet[k] = true
	}
	enc := tiktoken.NewTiktoken(core, &tiktoken.Encoding{
		Name:           EncodingName,
		PatStr:         cl100kPattern,
		MergeableRanks: ranks,
		SpecialTokens:  special,
	}, specialSet)
	return &Counter{enc: enc, ranks: ranks}, nil
}

// parseRanks decodes a .tiktoken rank file.
func parseRanks(data []byte) (map[string]int, error) {
	ranks := make(map[string]int, cl100kRanks)
	buf := make([]byte, 0, 256)
	line := 0
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		if len(l) == 0 {
			continue
		}
		sp := bytes.IndexByte(l, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("%w: line %d: no rank", ErrBadRanks, line)
		}
		b64, num := l[:sp], l[sp+1:]
		n := base64.StdEncoding.DecodedLen(len(b64))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		w, err := base64.StdEncoding.Decode(buf, b64)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrBadRanks, line, err)
		}
		rank, err := strconv.Atoi(string(num))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrBadRanks, line, err)
		}
		ranks[string(buf[:w])] = rank
	}
	if len(ranks) != cl100kRanks {
		return nil, fmt.Errorf("%w: %d ranks, want %d", ErrBadRanks, len(ranks), cl100kRanks)
	}
	return ranks, nil
}

// Count returns the number of cl100k_base tokens in s. Count("") is 0.
// Valid UTF-8 text is counted without the encoder and, for ASCII, without
// allocating (see ascii.go, unicode.go); the count is the same.
func (c *Counter) Count(s string) int {
	if s == "" {
		return 0
	}
	if n, ok := c.countASCII(s); ok {
		return n
	}
	if n, ok := c.countUTF8(s); ok {
		return n
	}
	// Invalid UTF-8: counted as the encoder counts it, on U+FFFD for each
	// invalid byte, but by the same bounded merge (the encoder's is
	// quadratic in a piece's length).
	n, _ := c.countUTF8(replaceInvalid(s))
	return n
}

// Encode returns the cl100k_base token ids of s, as ordinary text.
func (c *Counter) Encode(s string) []int {
	if s == "" {
		return nil
	}
	return c.enc.EncodeOrdinary(s)
}

// Decode returns the text of the given token ids. Unknown ids are skipped. A
// prefix of a token sequence may end inside a multi-byte character, in which
// case the result ends with an incomplete UTF-8 sequence; use DecodeValid to
// drop it.
func (c *Counter) Decode(ids []int) string {
	if len(ids) == 0 {
		return ""
	}
	return c.enc.Decode(ids)
}

// DecodeValid is Decode with any trailing incomplete UTF-8 sequence removed, so
// that a decoded token prefix is always a valid string prefix.
func (c *Counter) DecodeValid(ids []int) string {
	return trimIncompleteRune(c.Decode(ids))
}

// trimIncompleteRune drops a trailing partial UTF-8 sequence (at most 3 bytes).
func trimIncompleteRune(s string) string {
	// Look back at most 3 bytes for the start of the last sequence.
	for i := len(s) - 1; i >= 0 && i >= len(s)-3; i-- {
		b := s[i]
		if b < 0x80 {
			return s // ASCII: complete
		}
		if b >= 0xC0 { // leading byte
			need := 2
			switch {
			case b >= 0xF0:
				need = 4
			case b >= 0xE0:
				need = 3
			}
			if len(s)-i < need {
				return s[:i]
			}
			return s
		}
	}
	return s
}
