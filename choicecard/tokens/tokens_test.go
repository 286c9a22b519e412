package tokens

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// counter is built once for the whole test binary.
var counter = sync.OnceValues(CL100K)

func mustCounter(tb testing.TB) *Counter {
	tb.Helper()
	c, err := counter()
	if err != nil {
		tb.Fatalf("CL100K: %v", err)
	}
	return c
}

func TestEmbeddedRanksAreCL100K(t *testing.T) {
	sum := sha256.Sum256(cl100kBase)
	const want = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("embedded cl100k_base.tiktoken sha256 = %s, want %s", got, want)
	}
}

// Known cl100k_base encodings (OpenAI tiktoken; also cross-checked against
// js-tiktoken on the 3,641-tool catalog).
func TestKnownEncodings(t *testing.T) {
	c := mustCounter(t)
	tests := []struct {
		in   string
		want []int
	}{
		{"hello world", []int{15339, 1917}},
		{"tiktoken is great!", []int{83, 1609, 5963, 374, 2294, 0}},
		{"", nil},
		{" ", []int{220}},
		{"<|endoftext|>", []int{27, 91, 8862, 728, 428, 91, 29}}, // ordinary text, not the special token
	}
	for _, tt := range tests {
		got := c.Encode(tt.in)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if n := c.Count(tt.in); n != len(tt.want) {
			t.Errorf("Count(%q) = %d, want %d", tt.in, n, len(tt.want))
		}
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	c := mustCounter(t)
	for _, s := range []string{
		"hello world",
		"Ünïcödé façade — “quotes” … 使用必应搜索指定的关键词 😀👍🏽",
		"line one\n\n\tline two   ",
		strings.Repeat("ab ", 200),
	} {
		if got := c.Decode(c.Encode(s)); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	}
	if got := c.Decode(nil); got != "" {
		t.Errorf("Decode(nil) = %q", got)
	}
	if got := c.Decode([]int{-1, 1 << 30}); got != "" {
		t.Errorf("Decode(unknown ids) = %q, want empty", got)
	}
}

func TestDecodeValidDropsPartialRune(t *testing.T) {
	c := mustCounter(t)
	s := "查询" // CJK characters take several byte-level tokens each
	ids := c.Encode(s)
	for k := 0; k <= len(ids); k++ {
		got := c.DecodeValid(ids[:k])
		if !strings.HasPrefix(s, got) {
			t.Errorf("DecodeValid(ids[:%d]) = %q, not a prefix of %q", k, got, s)
		}
	}
	if got := c.DecodeValid(ids); got != s {
		t.Errorf("DecodeValid(all) = %q, want %q", got, s)
	}
}

func TestTrimIncompleteRune(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"a\xe6\x9f", "a"},     // 2 of 3 bytes
		{"a\xe6", "a"},         // 1 of 3 bytes
		{"a查", "a查"},           // complete
		{"a\xf0\x9f\x98", "a"}, // 3 of 4 bytes
		{"é", "é"},
	}
	for _, tt := range tests {
		if got := trimIncompleteRune(tt.in); got != tt.want {
			t.Errorf("trimIncompleteRune(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseRanksErrors(t *testing.T) {
	for _, in := range []string{
		"IQ==\n",           // no rank
		"IQ== x\n",         // bad rank
		"!!!! 0\n",         // bad base64
		"IQ== 0\nIg== 1\n", // too few ranks
		" 0\n",             // empty token
	} {
		if _, err := parseRanks([]byte(in)); !errors.Is(err, ErrBadRanks) {
			t.Errorf("parseRanks(%q) error = %v, want ErrBadRanks", in, err)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	c := mustCounter(t)
	const s = "Search the web using Bing and return a list of results."
	want := c.Count(s)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := c.Count(s); got != want {
					t.Errorf("concurrent Count = %d, want %d", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// description200 is a typical 200-character tool description.
const description200 = "Search GitHub issues and pull requests across repositories. " +
	"Supports filtering by state, labels, author and date; returns title, number, " +
	"URL and a short excerpt of the body for each match. Read-only."

func BenchmarkCount(b *testing.B) {
	c := mustCounter(b)
	b.SetBytes(int64(len(description200)))
	b.ReportAllocs()
	for b.Loop() {
		c.Count(description200)
	}
}

func BenchmarkCL100K(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CL100K(); err != nil {
			b.Fatal(err)
		}
	}
}
