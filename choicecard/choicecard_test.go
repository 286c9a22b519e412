package choicecard

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// builder is built once for the whole test binary.
var builder = sync.OnceValues(NewDefaultBuilder)

func mustBuilder(tb testing.TB) *Builder {
	tb.Helper()
	b, err := builder()
	if err != nil {
		tb.Fatalf("NewDefaultBuilder: %v", err)
	}
	return b
}

func mustBuild(tb testing.TB, in Input) Card {
	tb.Helper()
	c, err := mustBuilder(tb).Build(in)
	if err != nil {
		tb.Fatalf("Build(%q): %v", in.ID, err)
	}
	return c
}

// --- field whitelist ---------------------------------------------------------

func TestCardJSONKeysAreExactlySpec(t *testing.T) {
	base := []string{"cost_hint", "description", "has_schema", "id", "kind", "name", "namespace", "safety", "side_effects", "tags"}
	withScore := append(slices.Clone(base), "score")
	slices.Sort(withScore)

	c := mustBuild(t, Input{ID: "github:create_issue#34afee88", Name: "create_issue", Description: "Create an issue.",
		Namespace: "github", HasSchema: true, Destructive: true, SideEffects: true, CostHint: 1.5, Tags: []string{"issues"}})
	tests := []struct {
		name  string
		score float64
		want  []string
	}{
		{"unscored", 0, base},
		{"scored", 0.75, withScore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := c
			c.Score = tt.score
			raw, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tt.want) {
				t.Errorf("JSON keys = %v, want exactly %v\n%s", keys, tt.want, raw)
			}
		})
	}
}

func TestCardStructHasOnlySpecFields(t *testing.T) {
	want := map[string]string{
		"ID": "id", "Name": "name", "Description": "description", "Tags": "tags", "Kind": "kind",
		"Namespace": "namespace", "HasSchema": "has_schema", "Score": "score,omitempty",
		"CostHint": "cost_hint", "SideEffects": "side_effects", "Safety": "safety",
	}
	typ := reflect.TypeFor[Card]()
	if typ.NumField() != len(want) {
		t.Fatalf("Card has %d fields, spec 003 §2.1 permits %d", typ.NumField(), len(want))
	}
	for f := range typ.Fields() {
		if tag, ok := want[f.Name]; !ok || f.Tag.Get("json") != tag {
			t.Errorf("field %s json:%q is not a §2.1 field (want %q)", f.Name, f.Tag.Get("json"), tag)
		}
	}
}

func TestBuiltCardTagsMarshalAsArray(t *testing.T) {
	c := mustBuild(t, Input{ID: "a:b", Name: "b"})
	raw, _ := json.Marshal(c)
	if !strings.Contains(string(raw), `"tags":[]`) {
		t.Errorf("tags of an untagged card should marshal as [], got %s", raw)
	}
}

// --- normalisation -----------------------------------------------------------

func TestTags(t *testing.T) {
	long25 := strings.Repeat("x", 25)
	long24 := strings.Repeat("y", 24)
	tests := []struct {
		name       string
		tags       []string
		ro, destr  bool
		want       []string
		wantSafety Safety
	}{
		{"nil", nil, false, false, []string{}, SafetyNone},
		{"sorted deduplicated", []string{"b", "a", "b", "A"}, false, false, []string{"a", "b"}, SafetyNone},
		{"cap five", []string{"g", "f", "e", "d", "c", "b", "a"}, false, false, []string{"a", "b", "c", "d", "e"}, SafetyNone},
		{"read-only hint reserved", []string{"a", "b", "c", "d", "e", "f"}, true, false,
			[]string{"a", "b", "c", "d", "read-only"}, SafetyReadOnly},
		{"destructive hint reserved", []string{"a", "b", "c", "d", "e", "f"}, false, true,
			[]string{"a", "b", "c", "d", "destructive"}, SafetyDestructive},
		{"destructive wins", []string{"a", "b", "c", "d", "e", "f"}, true, true,
			[]string{"a", "b", "c", "destructive", "read-only"}, SafetyDestructive},
		{"safety tag from tags survives the cap", []string{"zeta", "a", "b", "c", "d", "e", "read-only"}, false, false,
			[]string{"a", "b", "c", "d", "read-only"}, SafetyReadOnly},
		{"both safety tags from tags", []string{"destructive", "read-only", "a"}, false, false,
			[]string{"a", "destructive", "read-only"}, SafetyDestructive},
		{"normalised spelling", []string{"  Read   Only ", "DESTRUCTIVE"}, false, false,
			[]string{"destructive", "read-only"}, SafetyDestructive},
		{"separators", []string{"a, b", "x|y", "k=v", "--dash--"}, false, false,
			[]string{"a-b", "dash", "k-v", "x-y"}, SafetyNone},
		{"too long dropped", []string{long25, long24}, false, false, []string{long24}, SafetyNone},
		{"24 runes is fine", []string{strings.Repeat("é", 24)}, false, false, []string{strings.Repeat("é", 24)}, SafetyNone},
		{"data and urls dropped", []string{`{"type":1}`, "[a]", `"q"`, "http://x", "ok"}, false, false, []string{"ok"}, SafetyNone},
		{"empty dropped", []string{"", "   ", "\n\t", "-"}, false, false, []string{}, SafetyNone},
		{"control chars", []string{"a\x00b", "c\nd"}, false, false, []string{"ab", "c-d"}, SafetyNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustBuild(t, Input{ID: "ns:tool", Name: "tool", Tags: tt.tags, ReadOnly: tt.ro, Destructive: tt.destr})
			if !slices.Equal(c.Tags, tt.want) || c.Tags == nil {
				t.Errorf("tags = %#v, want %#v", c.Tags, tt.want)
			}
			if c.Safety != tt.wantSafety {
				t.Errorf("safety = %q, want %q", c.Safety, tt.wantSafety)
			}
		})
	}
}

func TestName(t *testing.T) {
	n64 := strings.Repeat("n", 64)
	tests := []struct{ in, want string }{
		{"create_issue", "create_issue"},
		{n64, n64},
		{n64 + "x", strings.Repeat("n", 63) + Ellipsis},
		{strings.Repeat("查", 70), strings.Repeat("查", 63) + Ellipsis},
		{strings.Repeat("ab ", 40), strings.TrimRight(strings.Repeat("ab ", 21), " ") + Ellipsis},
		{"  two\n lines\t", "two lines"},
		{"", "ns:id"}, // empty name becomes the id
	}
	for _, tt := range tests {
		c := mustBuild(t, Input{ID: "ns:id", Name: tt.in})
		if c.Name != tt.want {
			t.Errorf("name %q -> %q, want %q", tt.in, c.Name, tt.want)
		}
		if n := utf8.RuneCountInString(c.Name); n > MaxNameChars {
			t.Errorf("name %q has %d chars", c.Name, n)
		}
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{"  lead and trail  ", "lead and trail"},
		{"a\n\nb\r\nc\td", "a b c d"},
		{"nul\x00 and del\x7f and esc\x1b[31m", "nul and del and esc[31m"},
		{"zero\u200bwidth and bidi\u202eoverride", "zerowidth and bidioverride"},
		{"nbsp\u00a0and\u3000ideographic\u2028sep", "nbsp and ideographic sep"},
		{"bad\xffutf8", "badutf8"},
		{"查询 天气。", "查询 天气。"},
		{"a \u0085 b", "a b"},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := oneLine(oneLine(tt.in)); got != tt.want {
			t.Errorf("oneLine not idempotent on %q", tt.in)
		}
		if isClean(tt.in) != (tt.in == tt.want) {
			t.Errorf("isClean(%q) = %v", tt.in, isClean(tt.in))
		}
	}
}

func TestBuildNormalisesFields(t *testing.T) {
	c := mustBuild(t, Input{ID: "fs:read#1", Name: "read", Description: "Read a file.\n\n  Returns   its text.",
		Namespace: " fs\n", CostHint: math.NaN()})
	if c.Description != "Read a file. Returns its text." {
		t.Errorf("description = %q", c.Description)
	}
	if c.Namespace != "fs" || c.Kind != KindTool || c.CostHint != 0 {
		t.Errorf("namespace %q kind %q cost %v", c.Namespace, c.Kind, c.CostHint)
	}
	for _, cost := range []float64{-1, math.Inf(1), math.Inf(-1)} {
		if c := mustBuild(t, Input{ID: "a:b", CostHint: cost}); c.CostHint != 0 {
			t.Errorf("cost %v -> %v, want 0", cost, c.CostHint)
		}
	}
}

func TestBuildInvalid(t *testing.T) {
	b := mustBuilder(t)
	for _, in := range []Input{
		{ID: ""},
		{ID: "a:b\nc"},
		{ID: " a:b"},
		{ID: "a:b "},
		{ID: "a:  b"},
		{ID: "a:\tb"},
		{ID: "a:\xffb"},
		{ID: "a:\u200bb"},
		{ID: "a:b", Kind: "widget"},
	} {
		if _, err := b.Build(in); !errors.Is(err, ErrInvalidCard) {
			t.Errorf("Build(%+q) error = %v, want ErrInvalidCard", in.ID, err)
		}
	}
	for _, k := range []Kind{KindTool, KindAgent, KindSkill, KindInternal, KindResource, KindPrompt} {
		if c := mustBuild(t, Input{ID: "a:b", Kind: k}); c.Kind != k {
			t.Errorf("kind %q -> %q", k, c.Kind)
		}
	}
}

// --- budgets and truncation --------------------------------------------------

func TestOverBudget(t *testing.T) {
	b := mustBuilder(t)
	tests := []struct {
		name string
		id   string
	}{
		{"id of 90 words", "ns:" + strings.TrimSpace(strings.Repeat("word ", 90))},
		{"id beyond any budget", "ns:" + strings.Repeat("x", maxTokenizedBytes+1)},
		{"name of rare characters", "ns:x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{ID: tt.id, Name: "n", Description: "Some description."}
			if tt.id == "ns:x" {
				in.Name = strings.Repeat("𝔘", 64) // 4-byte letters, several tokens each
			}
			_, err := b.Build(in)
			if !errors.Is(err, ErrOverBudget) {
				t.Fatalf("error = %v, want ErrOverBudget", err)
			}
			if !strings.Contains(err.Error(), tt.id[:min(20, len(tt.id))]) {
				t.Errorf("error %q does not name the id", err)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error message is %d bytes long", len(err.Error()))
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	b := mustBuilder(t)
	c := b.Counter()
	const three = "The first sentence is short. The second sentence is somewhat longer than the first one was. " +
		"The third sentence goes on and on and on without any particular purpose at all!"
	tests := []struct {
		name   string
		in     string
		budget int
		want   string // exact expectation, or "" to check properties only
		hard   bool   // expect a hard cut with an ellipsis
	}{
		{"fits verbatim", "Short enough.", 10, "Short enough.", false},
		{"two sentences", three, 25, "The first sentence is short. The second sentence is somewhat longer than the first one was.", false},
		{"one sentence", three, 12, "The first sentence is short.", false},
		{"exclamation and question", "Really? Yes! And then a much longer tail that cannot possibly fit here", 5, "Really? Yes!", false},
		{"no boundary inside a version", "Upgrade to v1.2 now and enjoy faster, safer, better builds for everyone", 6, "", true},
		{"hard cut", "a long description with no sentence terminator anywhere in its body at all", 8, "", true},
		{"hard cut drops dangling comma", "alpha, beta, gamma, delta, epsilon, zeta, eta, theta, iota, kappa", 6, "", true},
		{"CJK hard cut", "根据分类查询菜谱，可选分类有水产早餐荤菜主食素菜甜品汤羹饮品调料半成品", 10, "", true},
		{"tiny budget", "two words", 1, "", false},
		{"zero budget", "two words", 0, "", false},
		{"negative budget", "two words", -5, "", false},
		{"empty", "", 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := b.Truncate(tt.in, tt.budget)
			if again := b.Truncate(tt.in, tt.budget); again != got {
				t.Fatalf("not deterministic: %q then %q", got, again)
			}
			if n := c.Count(got); n > max(tt.budget, 0) {
				t.Errorf("Truncate(..., %d) = %q has %d tokens", tt.budget, got, n)
			}
			if tt.want != "" || !tt.hard {
				if got != tt.want {
					t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.budget, got, tt.want)
				}
				return
			}
			prefix, ok := strings.CutSuffix(got, Ellipsis)
			if !ok || prefix == "" || !strings.HasPrefix(tt.in, prefix) {
				t.Fatalf("Truncate(%q, %d) = %q, want a non-empty prefix + %q", tt.in, tt.budget, got, Ellipsis)
			}
			if strings.HasSuffix(prefix, " ") || strings.HasSuffix(prefix, ",") || strings.HasSuffix(prefix, "，") {
				t.Errorf("dangling separator before the ellipsis: %q", got)
			}
			if n := c.Count(got); n < tt.budget-2 {
				t.Errorf("hard cut %q uses only %d of %d tokens", got, n, tt.budget)
			}
		})
	}
}

// referenceTruncate is §2.4 by exhaustive search: every sentence-terminated
// prefix, then every token-boundary hard cut of the whole text, longest first.
func referenceTruncate(b *Builder, s string, budget int) string {
	c := b.Counter()
	if c.Count(s) <= budget {
		return s
	}
	for i := len(s) - 1; i >= 0; i-- {
		if strings.IndexByte(".!?", s[i]) >= 0 && (i+1 == len(s) || s[i+1] == ' ') && c.Count(s[:i+1]) <= budget {
			return s[:i+1]
		}
	}
	cuts := b.tokenCuts(s)
	for i := len(cuts) - 1; i >= 0; i-- {
		if d := strings.TrimRight(s[:cuts[i]], cutTrim) + Ellipsis; c.Count(d) <= budget {
			return d
		}
	}
	return ""
}

func TestTruncateMatchesExhaustiveSearch(t *testing.T) {
	ins := loadCatalog(t)
	b := mustBuilder(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 150 {
		// Join random descriptions into texts of up to a few kB, so that the
		// windowed search has to widen now and then.
		var parts []string
		for n := rng.IntN(12); n >= 0; n-- {
			parts = append(parts, oneLine(ins[rng.IntN(len(ins))].Description))
		}
		s := oneLine(strings.Join(parts, " "))
		if len(s) > 3000 { // keep the exhaustive reference affordable
			s = strings.TrimRight(cutBytes(s, 3000), " ")
		}
		budget := 3 + rng.IntN(120)
		got, want := b.Truncate(s, budget), referenceTruncate(b, s, budget)
		if got != want {
			t.Errorf("iter %d: Truncate(budget %d) = %q\nexhaustive search gives %q", iter, budget, got, want)
		}
	}
}

func TestTruncatePathological(t *testing.T) {
	b := mustBuilder(t)
	for name, s := range map[string]string{
		"one long word":     strings.Repeat("a", 100_000),
		"long punctuation":  strings.Repeat("!", 20_000),
		"long CJK run":      strings.Repeat("查", 30_000),
		"emoji":             strings.Repeat("😀", 20_000),
		"many sentences":    strings.Repeat("A b. ", 20_000),
		"late sentence end": strings.Repeat("-", 3000) + ". tail",
	} {
		t.Run(name, func(t *testing.T) {
			for _, budget := range []int{2, 10, 60, 80} {
				got := b.Truncate(s, budget)
				if n := b.Counter().Count(got); n > budget || (got == "" && budget > 5) {
					t.Errorf("budget %d: %d tokens, %q", budget, n, capRunes(got, 40))
				}
				if !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
					t.Errorf("budget %d: not a prefix", budget)
				}
			}
			c, err := b.Build(Input{ID: "a:b", Name: "b", Description: s})
			if err != nil || b.Tokens(c) > TargetTokens {
				t.Errorf("Build: %v, %d tokens", err, b.Tokens(c))
			}
		})
	}
}

func TestBuildTruncatesToTarget(t *testing.T) {
	b := mustBuilder(t)
	sentence := "This tool searches the issue tracker for matching issues and returns them. "
	tests := []struct {
		name     string
		in       Input
		wantEnd  string // the description must end with this
		wantMax  int
		wantMore int // the card must cost more than this (fallback to the hard cap)
	}{
		{"sentence boundary", Input{ID: "gh:search#1", Name: "search", Description: strings.Repeat(sentence, 10)}, ".", TargetTokens, 0},
		{"hard cut", Input{ID: "gh:search#1", Name: "search", Description: strings.Repeat("word ", 200)}, Ellipsis, TargetTokens, 0},
		{"large id falls back to the hard cap", Input{
			ID: idOfCost(t, 62, 70, "ab "), Name: "n",
			Description: strings.Repeat("word ", 200)}, Ellipsis, HardCapTokens, TargetTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := b.Build(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			n := b.Tokens(c)
			if n > tt.wantMax || n <= tt.wantMore {
				t.Errorf("card costs %d tokens, want (%d, %d]: %s", n, tt.wantMore, tt.wantMax, Render(c))
			}
			if !strings.HasSuffix(c.Description, tt.wantEnd) || c.Description == tt.wantEnd {
				t.Errorf("description %q should be a non-empty cut ending in %q", c.Description, tt.wantEnd)
			}
			if !strings.HasPrefix(oneLine(tt.in.Description), strings.TrimSuffix(c.Description, Ellipsis)) {
				t.Errorf("description %q is not a prefix of the input", c.Description)
			}
			c2, _ := b.Build(tt.in)
			if !reflect.DeepEqual(c, c2) {
				t.Errorf("Build is not deterministic")
			}
		})
	}
}

// idOfCost returns an id made of repeated unit whose card, with name "n" and
// no description, costs between lo and hi tokens.
func idOfCost(tb testing.TB, lo, hi int, unit string) string {
	tb.Helper()
	b := mustBuilder(tb)
	for k := 1; k < 500; k++ {
		id := "ns:" + strings.TrimSpace(strings.Repeat(unit, k))
		n := b.Tokens(Card{ID: id, Name: "n", Kind: KindTool})
		if n >= lo && n <= hi {
			return id
		}
		if n > hi {
			break
		}
	}
	tb.Fatalf("no id of %q units costs %d..%d tokens", unit, lo, hi)
	return ""
}

func TestBuildEmptyDescriptionFallback(t *testing.T) {
	b := mustBuilder(t)
	// Find an id whose card costs 79 or 80 tokens with an empty description:
	// the description is then cut to an ellipsis or to nothing.
	for words := 60; words < 90; words++ {
		id := "ns:" + strings.TrimSpace(strings.Repeat("w ", words))
		c, err := b.Build(Input{ID: id, Name: "n", Description: "A description that cannot fit."})
		if errors.Is(err, ErrOverBudget) {
			return // reached the cap without a failure
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := b.Tokens(c); n > HardCapTokens {
			t.Fatalf("%d tokens > cap", n)
		}
		if c.Description != "A description that cannot fit." && c.Description != Ellipsis && c.Description != "" &&
			!strings.HasSuffix(c.Description, Ellipsis) {
			t.Fatalf("unexpected description %q", c.Description)
		}
	}
	t.Fatal("never reached the hard cap")
}

// --- ordering ----------------------------------------------------------------

func TestSortProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	scores := []float64{0, 0.1, 0.5, 0.5, 1, 2.5, -1, math.NaN(), math.Inf(1)}
	for iter := range 500 {
		n := rng.IntN(30)
		cards := make([]Card, n)
		for i := range cards {
			cards[i] = Card{ID: fmt.Sprintf("ns:t%d", rng.IntN(12)), Score: scores[rng.IntN(len(scores))], Name: fmt.Sprint(i)}
		}
		sorted := slices.Clone(cards)
		Sort(sorted)
		for i := 1; i < len(sorted); i++ {
			a, b := sorted[i-1], sorted[i]
			if Compare(a, b) > 0 {
				t.Fatalf("iter %d: %+v before %+v", iter, a, b)
			}
			sa, sb := a.Score, b.Score
			if math.IsNaN(sa) && !math.IsNaN(sb) {
				t.Fatalf("NaN score before %v", sb)
			}
			if !math.IsNaN(sa) && !math.IsNaN(sb) && (sa < sb || (sa == sb && a.ID > b.ID)) {
				t.Fatalf("iter %d: order violated: %v/%s before %v/%s", iter, sa, a.ID, sb, b.ID)
			}
			if Compare(a, b) == 0 && a.Name > b.Name && len(a.Name) == len(b.Name) {
				t.Fatalf("iter %d: not stable", iter)
			}
		}
		// Same multiset of cards.
		key := func(c Card) string { return c.ID + "/" + c.Name }
		if !slices.Equal(slices.Sorted(slices.Values(mapSlice(cards, key))), slices.Sorted(slices.Values(mapSlice(sorted, key)))) {
			t.Fatalf("iter %d: Sort changed the set of cards", iter)
		}
		// Idempotent, and independent of input order when ids are unique.
		again := slices.Clone(sorted)
		Sort(again)
		if !slices.EqualFunc(again, sorted, sameCard) {
			t.Fatalf("iter %d: Sort is not idempotent", iter)
		}
		uniq := slices.CompactFunc(slices.Clone(sorted), func(a, b Card) bool { return a.ID == b.ID })
		shuffled := slices.Clone(uniq)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		Sort(shuffled)
		Sort(uniq)
		if !slices.EqualFunc(shuffled, uniq, sameCard) {
			t.Fatalf("iter %d: order depends on input order", iter)
		}
	}
}

func sameCard(a, b Card) bool {
	return a.ID == b.ID && a.Name == b.Name && (a.Score == b.Score || (math.IsNaN(a.Score) && math.IsNaN(b.Score)))
}

func mapSlice[T, U any](s []T, f func(T) U) []U {
	out := make([]U, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

// --- rendering ---------------------------------------------------------------

// goldenInputs are the cards of the rendering goldens.
var goldenInputs = []struct {
	name  string
	in    Input
	score float64
}{
	{"plain tool", Input{ID: "github:list_repos#da62b2ed", Name: "list_repos", Namespace: "github", HasSchema: true,
		Description: "List repositories for the authenticated user."}, 0.9},
	{"destructive with side effects and cost", Input{ID: "github:create_issue#34afee88", Name: "create_issue", Namespace: "github",
		HasSchema: true, Destructive: true, SideEffects: true, CostHint: 0.25, Tags: []string{"issues", "write"},
		Description: "Create a new issue in a GitHub repository."}, 1.7},
	{"read-only with tags", Input{ID: "fs:read_text_file#1a2b3c4d", Name: "read_text_file", Namespace: "fs", HasSchema: true,
		ReadOnly: true, Tags: []string{"files", "Local FS", "read-only"},
		Description: "Read the complete contents of a file as text.\nHandles various text encodings."}, 0.9},
	{"both safety hints", Input{ID: "db:migrate#0badf00d", Name: "migrate", Namespace: "db", ReadOnly: true, Destructive: true,
		Description: "Apply pending schema migrations."}, 0.4},
	{"resource", Input{ID: "resource::fs:readme#ab12cd34", Name: "README", Kind: KindResource, Namespace: "fs",
		Description: "Project readme (text/markdown)."}, 0},
	{"prompt", Input{ID: "prompt::gh:summarize#deadbeef", Name: "summarize_pr", Kind: KindPrompt, Namespace: "gh",
		Description: "Summarise a pull request for a reviewer."}, 0},
	{"cache breakpoint marker", Input{ID: "__cache_breakpoint__", Name: "cache breakpoint", Kind: KindInternal}, 0},
	{"sentence truncation", Input{ID: "osm:suggest_meeting_point#11223344", Name: "suggest_meeting_point", Namespace: "osm",
		HasSchema: true, Description: "Find the optimal meeting place for multiple people coming from different locations. " +
			"This tool calculates a central meeting point based on the locations of multiple individuals, then recommends " +
			"suitable venues near that central point. Supports walking, cycling and driving."}, 0.3},
	{"hard cut", Input{ID: "cook:recipes_by_category#55667788", Name: "recipes_by_category", Namespace: "cook",
		Description: "根据分类查询菜谱，可选分类有: 水产, 早餐, 调料, 甜品, 饮品, 荤菜, 半成品, 汤羹, 主食, 素菜"}, 0.3},
	{"long name", Input{ID: "aws:reverse_geocode#99aabbcc", Namespace: "aws",
		Name:        "Reverse Geocode Coordinates to Street Addresses Using the Amazon Location Service",
		Description: "Reverse geocode coordinates to addresses."}, 0.3},
	{"empty description", Input{ID: "misc:noop#00000000", Name: "noop", Namespace: "misc"}, 0},
}

func TestRenderGolden(t *testing.T) {
	b := mustBuilder(t)
	var out, list strings.Builder
	cards := make([]Card, 0, len(goldenInputs))
	for _, g := range goldenInputs {
		c := mustBuild(t, g.in)
		c.Score = g.score
		cards = append(cards, c)
		line := Render(c)
		if strings.ContainsAny(line, "\n\r") {
			t.Errorf("%s: rendered card spans lines: %q", g.name, line)
		}
		if strings.Contains(line, fmt.Sprint(g.score)) && g.score != 0 {
			t.Errorf("%s: score rendered: %q", g.name, line)
		}
		fmt.Fprintf(&out, "# %s (%d tokens)\n%s\n", g.name, b.Tokens(c), line)
	}
	Sort(cards)
	rendered := RenderList(cards)
	fmt.Fprintf(&list, "# %d cards, %d tokens (bound %d)\n%s\n", len(cards), b.Counter().Count(rendered),
		HardCapTokens*len(cards)+PreambleTokens, rendered)
	golden(t, "render.golden", out.String())
	golden(t, "render_list.golden", list.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestRenderHandMadeCard(t *testing.T) {
	c := Card{ID: "a:b", Name: "multi\nline", Kind: KindTool, Description: "x\r\ny", Tags: []string{"t\n1"},
		CostHint: math.Inf(1), Score: 3}
	want := "a:b | multi line | tool | tags=t 1 | x y"
	if got := Render(c); got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

func TestPreambleBound(t *testing.T) {
	b := mustBuilder(t)
	for _, n := range []int{0, 1, 9, 10, 99, 100, 999, 1000, 123456, 1 << 30, math.MaxInt} {
		if got := b.Counter().Count(preamble(n) + "\n"); got > PreambleTokens {
			t.Errorf("preamble(%d) costs %d tokens > %d", n, got, PreambleTokens)
		}
	}
}

func TestRenderListBoundWorstCase(t *testing.T) {
	b := mustBuilder(t)
	// Cards as close to the hard cap as ids allow, ending in punctuation
	// and ellipses, so every line break costs what it can.
	var cards []Card
	for _, unit := range []string{"q. ", "ab ", "?", "é "} {
		for k := 1; k < 200; k++ {
			if b.Tokens(Card{ID: "ns:" + strings.TrimSpace(strings.Repeat(unit, k)), Name: "n.", Kind: KindTool}) < HardCapTokens-12 {
				continue // far from the cap: skip the build
			}
			c, err := b.Build(Input{ID: "ns:" + strings.TrimSpace(strings.Repeat(unit, k)), Name: "n.",
				Description: strings.Repeat("more text, ", 30)})
			if err != nil {
				break
			}
			if b.Tokens(c) >= HardCapTokens-3 {
				cards = append(cards, c)
			}
		}
	}
	if len(cards) < 10 {
		t.Fatalf("built only %d near-cap cards", len(cards))
	}
	for n := 1; n <= len(cards); n++ {
		if got, bound := b.Counter().Count(RenderList(cards[:n])), HardCapTokens*n+PreambleTokens; got > bound {
			t.Fatalf("RenderList of %d near-cap cards costs %d tokens > %d", n, got, bound)
		}
	}
}

// --- the real catalog --------------------------------------------------------

type catalogTool struct {
	Server      string `json:"server"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// loadCatalog reads the shared 3,641-tool catalog, or skips.
func loadCatalog(tb testing.TB) []Input {
	tb.Helper()
	f, err := os.Open(filepath.Join("..", "..", "shared", "data", "tools.jsonl"))
	if err != nil {
		tb.Skipf("catalog not available: %v", err)
	}
	defer f.Close()
	var ins []Input
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<26)
	for sc.Scan() {
		var r catalogTool
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatalf("tools.jsonl line %d: %v", len(ins)+1, err)
		}
		ins = append(ins, Input{ID: r.Server + ":" + r.Name, Name: r.Name, Description: r.Description,
			Kind: KindTool, Namespace: strings.ToLower(r.Server), HasSchema: true})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return ins
}

func TestCatalogCardsWithinBudget(t *testing.T) {
	ins := loadCatalog(t)
	b := mustBuilder(t)
	start := time.Now()
	cards := make([]Card, 0, len(ins))
	for _, in := range ins {
		c, err := b.Build(in)
		if err != nil {
			t.Errorf("Build(%q): %v", in.ID, err)
			continue
		}
		cards = append(cards, c)
	}
	elapsed := time.Since(start)

	truncated, sentence, hard, overTarget, maxTok := 0, 0, 0, 0, 0
	for i, c := range cards {
		n := b.Tokens(c)
		if line := b.Counter().Count(Render(c)); line > n || n > HardCapTokens {
			t.Errorf("%s: %d tokens (line %d) > %d", c.ID, n, line, HardCapTokens)
		}
		maxTok = max(maxTok, n)
		if n > TargetTokens {
			overTarget++
		}
		if c.Description != oneLine(ins[i].Description) {
			truncated++
			if strings.HasSuffix(c.Description, Ellipsis) {
				hard++
			} else {
				sentence++
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		n := 1 + rng.IntN(20)
		start := rng.IntN(len(cards) - n)
		page := slices.Clone(cards[start : start+n])
		Sort(page)
		if got := b.Counter().Count(RenderList(page)); got > HardCapTokens*n+PreambleTokens {
			t.Errorf("RenderList of %d cards costs %d tokens", n, got)
		}
	}
	t.Logf("built %d cards in %v; %d truncated (%d at a sentence, %d hard cut), %d above the %d-token target, max %d tokens",
		len(cards), elapsed, truncated, sentence, hard, overTarget, TargetTokens, maxTok)
}

// --- fuzzing -----------------------------------------------------------------

func FuzzBuild(f *testing.F) {
	for _, g := range goldenInputs {
		tag := ""
		if len(g.in.Tags) > 0 {
			tag = g.in.Tags[0]
		}
		f.Add(g.in.ID, g.in.Name, g.in.Description, tag, "x", g.in.Namespace, string(g.in.Kind), g.in.CostHint,
			g.in.ReadOnly, g.in.Destructive, g.in.SideEffects)
	}
	f.Add("a:b", "\x00", strings.Repeat("a", 3000), "read-only", "destructive", "", "tool", math.NaN(), true, true, true)
	f.Add("ns:"+strings.Repeat("w ", 70)+"w", "n", "…. . . ! ?", "{", "]", "", "", -1.0, false, false, false)
	b := mustBuilder(f)
	f.Fuzz(func(t *testing.T, id, name, desc, tag1, tag2, ns, kind string, cost float64, ro, destr, se bool) {
		in := Input{ID: id, Name: name, Description: desc, Tags: []string{tag1, tag2}, Namespace: ns, Kind: Kind(kind),
			CostHint: cost, ReadOnly: ro, Destructive: destr, SideEffects: se}
		c, err := b.Build(in)
		if err != nil {
			if !errors.Is(err, ErrOverBudget) && !errors.Is(err, ErrInvalidCard) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		line := Render(c)
		if n := b.Counter().Count(line); n > HardCapTokens || b.Tokens(c) > HardCapTokens {
			t.Fatalf("card costs %d tokens: %q", n, line)
		}
		if c.ID != id || strings.ContainsAny(line, "\n\r") || strings.ContainsAny(c.Description, "\n\r\t") {
			t.Fatalf("id changed or multi-line card: %q", line)
		}
		if utf8.RuneCountInString(c.Name) > MaxNameChars || len(c.Tags) > MaxTags || !slices.IsSorted(c.Tags) {
			t.Fatalf("bounds violated: %+v", c)
		}
		for _, tg := range c.Tags {
			if utf8.RuneCountInString(tg) > MaxTagChars || tg == "" {
				t.Fatalf("bad tag %q", tg)
			}
		}
		isTag := func(want string) bool { return normTag(tag1) == want || normTag(tag2) == want }
		wantSafety := SafetyNone
		switch {
		case destr || isTag(TagDestructive):
			wantSafety = SafetyDestructive
		case ro || isTag(TagReadOnly):
			wantSafety = SafetyReadOnly
		}
		if c.Safety != wantSafety {
			t.Fatalf("safety %q, want %q (ro=%v destructive=%v tags %q %q)", c.Safety, wantSafety, ro, destr, tag1, tag2)
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("marshal: %v", err)
		}
	})
}

func FuzzTruncate(f *testing.F) {
	f.Add("The first sentence. The second one is longer than the first.", 8)
	f.Add("根据分类查询菜谱，可选分类有: 水产, 早餐", 5)
	f.Add(strings.Repeat("!", 3000), 40)
	f.Add("", -1)
	b := mustBuilder(f)
	f.Fuzz(func(t *testing.T, s string, budget int) {
		budget %= 200
		s = oneLine(s)
		got := b.Truncate(s, budget)
		if n := b.Counter().Count(got); n > max(budget, 0) {
			t.Fatalf("Truncate(%q, %d) = %q: %d tokens", s, budget, got, n)
		}
		if !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
			t.Fatalf("Truncate(%q, %d) = %q is not a prefix", s, budget, got)
		}
	})
}

// --- benchmarks --------------------------------------------------------------

func BenchmarkBuildCatalog(b *testing.B) {
	ins := loadCatalog(b)
	bl := mustBuilder(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, in := range ins {
			if _, err := bl.Build(in); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(ins)), "cards/op")
}

func BenchmarkBuild(b *testing.B) {
	bl := mustBuilder(b)
	in := goldenInputs[1].in
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bl.Build(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildTruncated(b *testing.B) {
	bl := mustBuilder(b)
	in := goldenInputs[7].in
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bl.Build(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	c := mustBuild(b, goldenInputs[1].in)
	b.ReportAllocs()
	for b.Loop() {
		_ = Render(c)
	}
}
