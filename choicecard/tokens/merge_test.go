package tokens

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMergeCountLongMatchesScan holds the heap merge to the scan it
// replaces for long pieces: letters from small alphabets (many merges, many
// equal ranks) and real words, at lengths around and above longPiece.
func TestMergeCountLongMatchesScan(t *testing.T) {
	c := mustCounter(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, alphabet := range []string{"a", "ab", "abc", "etaoinshr", "aeiouAEIOUxyzq"} {
		for _, n := range []int{2, 3, 17, 63, 64, 255, 256, 257, 1000, 3000} {
			b := make([]byte, n)
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			p := string(b)
			if got, want := c.mergeCountLong(p), c.mergeCount(p); got != want {
				t.Fatalf("mergeCountLong(%d bytes of %q) = %d, scan %d", n, alphabet, got, want)
			}
		}
	}
	for _, p := range []string{"ab", "internationalization", strings.Repeat("Supercalifragilistic", 40), strings.Repeat("x", 5000)} {
		if got, want := c.mergeCountLong(p), c.mergeCount(p); got != want {
			t.Fatalf("mergeCountLong(%.20q…) = %d, scan %d", p, got, want)
		}
	}
}

// TestCountLongPiecesMatchEncoder checks long pieces end to end against the
// encoder, at sizes its quadratic merge still finishes quickly.
func TestCountLongPiecesMatchEncoder(t *testing.T) {
	c := mustCounter(t)
	for _, s := range []string{
		strings.Repeat("a", 2000), strings.Repeat("ab", 700), strings.Repeat("é", 600),
		strings.Repeat("使用", 400), strings.Repeat("9", 999), strings.Repeat("!", 1500),
		strings.Repeat(" ", 1200) + "x", "word " + strings.Repeat("z", 800) + " end",
	} {
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Errorf("Count(%d bytes %.12q…) = %d, encoder %d", len(s), s, got, want)
		}
	}
}

// TestCountInvalidUTF8MatchesEncoder holds the invalid-UTF-8 path (each
// invalid byte counted as U+FFFD) to the encoder on seeded random bytes.
func TestCountInvalidUTF8MatchesEncoder(t *testing.T) {
	c := mustCounter(t)
	for _, s := range []string{"a\xffb", "\xe6\x9f", "ok \xc3", "\xff\xfe\xfd", "é\x80é", "\xed\xa0\x80", "x\xf4\x90\x80\x80y"} {
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Errorf("Count(%q) = %d, encoder %d", s, got, want)
		}
	}
	pool := []byte("ab '\n 1\x80\xbf\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\xff")
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = pool[rng.IntN(len(pool))]
		}
		s := string(b)
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Fatalf("Count(%q) = %d, encoder %d", s, got, want)
		}
	}
}

// BenchmarkCountLongPiece is the worst case the bounded merge is for: a
// result that is one 200 KB piece (the encoder took ~30 s on it).
func BenchmarkCountLongPiece(b *testing.B) {
	c := mustCounter(b)
	for _, tc := range []struct{ name, s string }{
		{"letters", strings.Repeat("a", 200<<10)},
		{"digits-words", strings.Repeat("ab", 100<<10)},
		{"unicode", strings.Repeat("é", 100<<10)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.s)))
			b.ReportAllocs()
			for b.Loop() {
				c.Count(tc.s)
			}
		})
	}
}
