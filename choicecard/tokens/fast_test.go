package tokens

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// encoderCount is the count by tiktoken-go's encoder, the reference of the
// ASCII fast path.
func encoderCount(c *Counter, s string) int { return len(c.enc.EncodeOrdinary(s)) }

// TestCountASCIIMatchesEncoder holds the ASCII fast path to the encoder on the
// pattern's corner cases (every alternative, and the backtracking between
// them) and on seeded random text drawn from the bytes that decide them.
func TestCountASCIIMatchesEncoder(t *testing.T) {
	c := mustCounter(t)
	cases := []string{
		"hello", "hello world", "'s", "'S", "'sa", "'re", "'RE", "'rE", "'r", "'ve", "'v", "'m", "'ll", "'l", "'LL",
		"'d", "'t", "don't", "we're", "I'll", "'", "''", "'''s", "x's", "'1", "' s",
		"(hello", "\"text\"", " word", "\tword", "\vword", "\rword", "\nword", "1word", "__init__",
		"1", "12", "123", "1234", "1234567", "a1b2", " 1", "  1",
		"!", "!!", " !", " !\n", "!!\r\n\r\nx", " ", "  ", "   x", " \n", "\n", "\n\n", "\r\n", " \r\n ", "\n \n  x",
		"x  \n  ", "a \t b", "\t\t", "\t\tx", "  \x00", "\x00\x01\x1f\x7f", "\x1c\x1dword", "a\x0bb", "\f\fx",
		`{"type":"text","text":"hello"}`,
		`{"summary":"text part 1 inline (1 token).","facts":[],"result":{"content":[{"type":"text","text":"hello"}]},"artifacts":[],"views":[]}`,
		strings.Repeat("a", 200), strings.Repeat(" ", 200) + "x", strings.Repeat("ab1 ", 60), strings.Repeat("=", 100),
		"aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IHRoYXQgaXMgcXVpdGUgbG9uZyBhbmQgaGFzIG5vIHNwYWNlcw==",
		"2026-11-26T10:41:00Z INFO request served in 12.5ms path=/mcp status=200\n",
	}
	for _, s := range cases {
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Errorf("Count(%q) = %d, encoder %d", s, got, want)
		}
	}
	// Random text over the bytes the pattern distinguishes.
	const alphabet = "aZs'tTrReEvVmMlLdD09 \t\n\r\v\f!\"#(){}:,._-\x00\x1f\x7f"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(b)
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Fatalf("Count(%q) = %d, encoder %d", s, got, want)
		}
	}
}

// TestCountOnCatalog compares the fast paths with the encoder on every line
// of the shared catalog (descriptions and schemas, some in other scripts),
// when it is there.
func TestCountOnCatalog(t *testing.T) {
	data, err := os.ReadFile("../../../shared/data/tools.jsonl")
	if err != nil {
		t.Skip("shared catalog not present:", err)
	}
	c := mustCounter(t)
	lines := strings.Split(string(data), "\n")
	if testing.Short() {
		lines = lines[:min(len(lines), 300)]
	}
	checked := 0
	for _, l := range lines {
		checked++
		if got, want := c.Count(l), encoderCount(c, l); got != want {
			t.Fatalf("Count(catalog line %.80q...) = %d, encoder %d", l, got, want)
		}
	}
	if checked == 0 {
		t.Fatal("no line in the catalog")
	}
}

// TestCountUTF8MatchesEncoder holds the UTF-8 path to the encoder: letters,
// numbers and spaces of other scripts, runes next to contractions, and
// seeded random text mixing them with the ASCII bytes that decide the
// pattern. Invalid UTF-8 is counted on U+FFFD for each invalid byte.
func TestCountUTF8MatchesEncoder(t *testing.T) {
	c := mustCounter(t)
	cases := []string{
		"café", "使用必应搜索指定的关键词", "it’s", "x\u00a0y", "Ünïcödé façade — “quotes” …", "😀👍🏽 ok",
		"٣٤٥٦ digits", "Ⅻ roman", "½ half", "\u2028line\u2029para", "a\u3000b", "  \u00a0 x", "\u0085\n x", "'ſ", "'K", "'é",
		"x'Ll", "é's", "\r\n\u00a0\u00a0", "(ñandú)", "\u00a0ñ", "1²³", "a\u200bb", "\ufffd\ufffd", "—\n\n", " «»\r",
	}
	for _, s := range cases {
		if _, ok := c.countUTF8(s); !ok {
			t.Errorf("countUTF8(%q) did not take the fast path", s)
		}
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Errorf("Count(%q) = %d, encoder %d", s, got, want)
		}
	}
	for _, s := range []string{"a\xffb", "\xe6\x9f", "ok \xc3"} {
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Errorf("Count(%q) = %d, encoder %d", s, got, want)
		}
	}
	runes := []rune("aZs'tTrReElLdD09 \t\n\r!\"(),._-éñßЖж中文٣½²Ⅻ\u00a0\u2028\u3000\u0085\u200b—“’😀\ufffd")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]rune, rng.IntN(30))
		for i := range b {
			b[i] = runes[rng.IntN(len(runes))]
		}
		s := string(b)
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Fatalf("Count(%q) = %d, encoder %d", s, got, want)
		}
	}
}

func FuzzCount(f *testing.F) {
	for _, s := range []string{"使用 café’s", "a\xffb", "hello world", "'re 'LL 's", " !!\r\n", "\n \n  x", "123456", "a\tb", "{\"a\":[1,2]}"} {
		f.Add(s)
	}
	c := mustCounter(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return // the encoder's merge is quadratic in a piece's length
		}
		if got, want := c.Count(s), encoderCount(c, s); got != want {
			t.Fatalf("Count(%q) = %d, encoder %d", s, got, want)
		}
	})
}

func BenchmarkCountEncoder(b *testing.B) {
	c := mustCounter(b)
	b.SetBytes(int64(len(description200)))
	b.ReportAllocs()
	for b.Loop() {
		encoderCount(c, description200)
	}
}

// descriptionUTF8 is a description with accents, typographic punctuation and
// CJK, counted by the UTF-8 path.
const descriptionUTF8 = "Recherche sur le Web via Bing — renvoie « titre », URL et extrait. " +
	"使用必应搜索指定的关键词，并返回搜索结果。 It’s read-only."

func BenchmarkCountUTF8(b *testing.B) {
	c := mustCounter(b)
	b.SetBytes(int64(len(descriptionUTF8)))
	b.ReportAllocs()
	for b.Loop() {
		c.Count(descriptionUTF8)
	}
}

func BenchmarkCountUTF8Encoder(b *testing.B) {
	c := mustCounter(b)
	b.SetBytes(int64(len(descriptionUTF8)))
	b.ReportAllocs()
	for b.Loop() {
		encoderCount(c, descriptionUTF8)
	}
}
