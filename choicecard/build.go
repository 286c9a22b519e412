package choicecard

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/choicecard/tokens"
)

// ErrOverBudget reports a card whose rendered line exceeds HardCapTokens even
// with its description cut to nothing: its other fields (usually a very long
// id) are too large. It is the spec's CatalogError for §2.3; the card is not
// built, no field is dropped to make it fit.
var ErrOverBudget = errors.New("choicecard: card exceeds the token hard cap")

// ErrInvalidCard reports an Input that cannot become a card: an empty id, an
// id that is not one clean line, or an unknown kind.
var ErrInvalidCard = errors.New("choicecard: invalid card input")

// maxTokenizedBytes bounds the text handed to the tokenizer for a single
// field: nothing longer can fit in HardCapTokens tokens, since no cl100k_base
// token is longer than tokens.MaxTokenBytes bytes.
const maxTokenizedBytes = HardCapTokens * tokens.MaxTokenBytes

// Input is what a card is built from: one catalog item's identity and text,
// as reported upstream.
type Input struct {
	// ID is the item's canonical id; it is kept byte for byte. It must be
	// non-empty, valid UTF-8, without control or format characters, and with
	// no whitespace other than single inner spaces, so that it renders as is.
	ID string
	// Name is the display name; cut to MaxNameChars characters with an
	// ellipsis when longer (the id carries the full identity). An empty name
	// becomes the id.
	Name string
	// Description is the full upstream description; the card gets it on one
	// line, truncated to the token budget.
	Description string
	// Tags are free-form tags; see Builder.Build for the rules.
	Tags []string
	// Kind is what the item is; empty means KindTool.
	Kind Kind
	// Namespace is the id's namespace (made one line, otherwise kept).
	Namespace string
	// HasSchema says whether hydration yields an input schema.
	HasSchema bool
	// CostHint is a relative cost; NaN, infinite and negative values become 0.
	CostHint float64
	// SideEffects says the item changes state.
	SideEffects bool
	// ReadOnly is the item's read-only hint (MCP readOnlyHint, or a registry
	// classification); it adds the read-only tag.
	ReadOnly bool
	// Destructive is the item's destructive hint (MCP destructiveHint); it
	// adds the destructive tag.
	Destructive bool
}

// Builder turns Inputs into bounded Cards. It holds only an immutable token
// Counter and is safe for concurrent use.
type Builder struct {
	counter *tokens.Counter
}

// NewBuilder returns a Builder that measures cards with counter, which must be
// a cl100k_base counter (tokens.CL100K).
func NewBuilder(counter *tokens.Counter) *Builder {
	return &Builder{counter: counter}
}

// NewDefaultBuilder builds a cl100k_base Counter and a Builder on it. Build
// it once: the Counter takes tens of milliseconds to construct.
func NewDefaultBuilder() (*Builder, error) {
	c, err := tokens.CL100K()
	if err != nil {
		return nil, fmt.Errorf("choicecard: %w", err)
	}
	return NewBuilder(c), nil
}

// Counter returns the Builder's token counter.
func (b *Builder) Counter() *tokens.Counter { return b.counter }

// Tokens returns what card c costs in a prompt: the tokens of its rendered
// line plus the line break that follows it in RenderList. This is the
// quantity the §2.3 budgets bound; the line alone never costs more.
func (b *Builder) Tokens(c Card) int {
	return b.counter.Count(Render(c) + "\n")
}

// Build makes a card from in. The rules, in order:
//
//   - id: kept exactly; an empty id, or one that is not a clean line (see
//     Input.ID), is ErrInvalidCard. An id too long to ever fit the hard cap
//     is ErrOverBudget. Kind: empty means tool; an unknown kind is
//     ErrInvalidCard.
//   - name, description, namespace, tags: reduced to one line (invalid UTF-8
//     and control/format characters removed, whitespace runs to one space,
//     trimmed). The name is cut to MaxNameChars with a trailing ellipsis.
//   - tags: lower-cased, with runs of spaces, commas, '|' and '=' turned into
//     one '-'; empty tags are dropped, and so are tags longer than
//     MaxTagChars and tags that look like stringified data or addresses
//     ('{', '}', '[', ']', '"', "://"), since a cut tag would be a different,
//     misleading tag and §2.2 bans schemas and URLs in any form. The
//     ReadOnly and Destructive hints add the read-only and destructive tags.
//     The set is deduplicated and sorted; the safety tags are reserved into
//     it first and the other tags fill the remaining places, in sorted order,
//     up to MaxTags in all. Safety is derived from the kept safety tags,
//     destructive winning over read-only.
//   - budget: when the card costs more than TargetTokens (see Tokens) its
//     description, and nothing else, is truncated per §2.4 (see Truncate): to
//     the longest prefix ending at a sentence terminator that fits, else to a
//     hard cut at a token boundary followed by an ellipsis. If no non-empty
//     prefix fits the target because the other fields are too large, the
//     same truncation is done against HardCapTokens instead, and as a last
//     resort the description is cut to a bare ellipsis or to nothing. A card
//     that still costs more than HardCapTokens is ErrOverBudget.
//
// Errors wrap ErrInvalidCard or ErrOverBudget and name the id.
func (b *Builder) Build(in Input) (Card, error) {
	if in.ID == "" {
		return Card{}, fmt.Errorf("%w: empty id", ErrInvalidCard)
	}
	if !isClean(in.ID) {
		return Card{}, fmt.Errorf("%w: id %s is not one clean line (control characters, invalid UTF-8, or stray whitespace)",
			ErrInvalidCard, quoteID(oneLine(in.ID)))
	}
	kind := in.Kind
	if kind == "" {
		kind = KindTool
	}
	if !kind.Valid() {
		return Card{}, fmt.Errorf("%w: id %s: unknown kind %q", ErrInvalidCard, quoteID(in.ID), capRunes(string(kind), 32))
	}
	if len(in.ID) > maxTokenizedBytes {
		return Card{}, fmt.Errorf("%w: id %s: the id alone is %d bytes", ErrOverBudget, quoteID(in.ID), len(in.ID))
	}

	name := oneLine(in.Name)
	if name == "" {
		name = in.ID
	}
	tags, safety := buildTags(in.Tags, in.ReadOnly, in.Destructive)
	cost := in.CostHint
	if math.IsNaN(cost) || math.IsInf(cost, 0) || cost < 0 {
		cost = 0
	}
	card := Card{
		ID:          in.ID,
		Name:        cutName(name),
		Tags:        tags,
		Kind:        kind,
		Namespace:   oneLine(in.Namespace),
		HasSchema:   in.HasSchema,
		CostHint:    cost,
		SideEffects: in.SideEffects,
		Safety:      safety,
	}
	// Nothing longer than maxTokenizedBytes can fit, so cutting there first
	// bounds the tokenizer's work without changing the result.
	desc := strings.TrimRight(cutBytes(oneLine(in.Description), maxTokenizedBytes), " ")
	if err := b.fitDescription(&card, desc); err != nil {
		return Card{}, err
	}
	return card, nil
}

// fitDescription sets card.Description to desc, truncated to the budgets.
func (b *Builder) fitDescription(card *Card, desc string) error {
	cost := func(d string) int {
		card.Description = d
		return b.Tokens(*card)
	}
	within := func(budget int) func(string) bool {
		return func(d string) bool { return cost(d) <= budget }
	}
	if fitsWhole(desc, within(TargetTokens)) {
		card.Description = desc
		return nil
	}
	if desc != "" {
		if d, ok := b.truncate(desc, within(TargetTokens)); ok {
			card.Description = d
			return nil
		}
		// The other fields leave no room under the target: keep what the
		// hard cap allows.
		if fitsWhole(desc, within(HardCapTokens)) {
			card.Description = desc
			return nil
		}
		if d, ok := b.truncate(desc, within(HardCapTokens)); ok {
			card.Description = d
			return nil
		}
		if cost(Ellipsis) <= HardCapTokens {
			return nil
		}
	}
	n := cost("")
	if n <= HardCapTokens {
		return nil
	}
	card.Description = ""
	return fmt.Errorf("%w: id %s: %d tokens with an empty description, cap %d",
		ErrOverBudget, quoteID(card.ID), n, HardCapTokens)
}

// window is the first stretch of a long text that truncation examines; it
// grows fourfold while every candidate in it fits. A fitting description is
// at most HardCapTokens tokens, a few hundred bytes of ordinary text, so one
// window almost always suffices, and the tokenizer's cost on pathological
// text (one 10 kB word encodes in time quadratic in its length) stays small.
const window = 1024

// fitsWhole reports fits(s), first ruling out a long s whose leading window
// alone does not fit.
func fitsWhole(s string, fits func(string) bool) bool {
	if len(s) > window && !fits(cutBytes(s, window)) {
		return false
	}
	return fits(s)
}

// Truncate shortens the one-line text s to at most budget cl100k_base tokens
// per spec 003 §2.4: s itself if it fits; else its longest prefix that ends at
// a sentence terminator ('.', '!' or '?' followed by a space or the end) and
// fits; else a hard cut at the longest token-boundary prefix that fits
// together with the appended ellipsis (budget-1 tokens of text in the usual
// case), with dangling spaces, commas, semicolons and colons dropped before the
// ellipsis. It returns "" when budget is too small for even one token and an
// ellipsis. The result depends on s and budget only. Pass text through the
// builder's one-line normalisation first if it may hold line breaks.
func (b *Builder) Truncate(s string, budget int) string {
	if len(s) <= budget { // a token is at least one byte
		return s
	}
	if budget <= 0 {
		return ""
	}
	fits := func(d string) bool { return b.counter.Count(d) <= budget }
	if limit := (budget + 1) * tokens.MaxTokenBytes; len(s) > limit {
		s = cutBytes(s, limit) // the whole cannot fit; nothing past this can
	} else if fitsWhole(s, fits) {
		return s
	}
	if budget < 2 {
		return "" // no room for text and an ellipsis
	}
	d, _ := b.truncate(s, fits)
	return d
}

// truncate returns the §2.4 truncation of desc: the longest fitting
// sentence-terminated prefix, else the longest fitting hard cut with an
// ellipsis. fits must be (close to) monotone in the prefix length; every
// returned candidate has been checked with fits. ok is false when no
// non-empty candidate fits. It looks at a window of desc first and widens it
// only while every candidate in the window fits.
func (b *Builder) truncate(desc string, fits func(string) bool) (string, bool) {
	// Sentence boundaries: a terminator followed by a space or the end.
	var ends []int
	for i := 0; i < len(desc); i++ {
		switch desc[i] {
		case '.', '!', '?':
			if i+1 == len(desc) || desc[i+1] == ' ' {
				ends = append(ends, i+1)
			}
		}
	}
	for w := window; ; w *= 4 {
		whole := w >= len(desc)
		n := len(ends)
		if !whole {
			n, _ = slices.BinarySearch(ends, w+1) // ends within the window
		}
		i := largestFitting(n, func(i int) bool { return fits(desc[:ends[i]]) })
		if i >= 0 && (whole || i < n-1) {
			return desc[:ends[i]], true
		}
		if whole || i < 0 && n > 0 {
			break // a sentence end in the window already fails: none fits
		}
	}
	for w := window; ; w *= 4 {
		win := cutBytes(desc, w)
		whole := len(win) == len(desc)
		cuts := b.tokenCuts(win)
		cand := func(i int) string { return strings.TrimRight(win[:cuts[i]], cutTrim) + Ellipsis }
		i := largestFitting(len(cuts), func(i int) bool { return fits(cand(i)) })
		if whole || i < len(cuts)-1 {
			if i < 0 {
				return "", false
			}
			return cand(i), true
		}
	}
}

// tokenCuts returns the byte offsets inside s, in increasing order, that end
// a token of s's encoding, fall on a character boundary and leave something
// before them besides separators.
func (b *Builder) tokenCuts(s string) []int {
	ids := b.counter.Encode(s)
	cuts := make([]int, 0, len(ids))
	off := 0
	for _, id := range ids {
		off += len(b.counter.Decode([]int{id}))
		if off >= len(s) {
			break
		}
		if utf8.RuneStart(s[off]) && strings.TrimRight(s[:off], cutTrim) != "" {
			cuts = append(cuts, off)
		}
	}
	return cuts
}

// cutTrim is what a hard cut drops from its end before the ellipsis: spaces
// and separators that would dangle before it (ASCII and CJK).
const cutTrim = " ,;:，、；："

// largestFitting returns the largest i in [0, n) with fits(i), assuming fits
// is true up to some point and false after it, or -1 if fits(0) is false. It
// only returns an index it has evaluated as true.
func largestFitting(n int, fits func(int) bool) int {
	lo, hi := -1, n // fits(lo) known true (or lo virtual), fits(hi) false (or virtual)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// buildTags applies the tag rules and derives the safety class.
func buildTags(in []string, readOnly, destructive bool) ([]string, Safety) {
	set := make([]string, 0, len(in)+2)
	if readOnly {
		set = append(set, TagReadOnly)
	}
	if destructive {
		set = append(set, TagDestructive)
	}
	for _, t := range in {
		if t = normTag(t); t != "" {
			set = append(set, t)
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)

	kept := make([]string, 0, MaxTags)
	hasRO, hasD := false, false
	for _, t := range set { // reserve the safety tags first
		switch t {
		case TagReadOnly:
			hasRO = true
			kept = append(kept, t)
		case TagDestructive:
			hasD = true
			kept = append(kept, t)
		}
	}
	for _, t := range set {
		if len(kept) == MaxTags {
			break
		}
		if t != TagReadOnly && t != TagDestructive {
			kept = append(kept, t)
		}
	}
	slices.Sort(kept)

	safety := SafetyNone
	switch {
	case hasD:
		safety = SafetyDestructive
	case hasRO:
		safety = SafetyReadOnly
	}
	return kept, safety
}

// normTag normalises one tag, returning "" for a tag that is dropped.
func normTag(t string) string {
	t = strings.ToLower(oneLine(t))
	if t == "" {
		return ""
	}
	var b strings.Builder
	dash := false
	for _, r := range t {
		switch {
		case r == ' ' || r == ',' || r == '|' || r == '=' || r == '-':
			dash = true
		default:
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		}
	}
	t = b.String()
	if t == "" || utf8.RuneCountInString(t) > MaxTagChars ||
		strings.ContainsAny(t, `{}[]"`) || strings.Contains(t, "://") {
		return ""
	}
	return t
}

// cutName caps a display name at MaxNameChars characters, ending a cut name
// with an ellipsis.
func cutName(s string) string {
	if utf8.RuneCountInString(s) <= MaxNameChars {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxNameChars-1 {
			return strings.TrimRight(s[:i], " ") + Ellipsis
		}
		n++
	}
	return s
}

// oneLine removes invalid UTF-8 and control and format characters, turns
// every run of whitespace into one space and trims the ends.
func oneLine(s string) string {
	if isClean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			continue // invalid byte
		case unicode.IsSpace(r):
			space = true
		case isControl(r):
			continue
		default:
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isClean reports whether oneLine(s) == s, cheaply for the common case.
func isClean(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	prevSpace := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return isCleanUnicode(s)
		}
		if c < 0x20 || c == 0x7f {
			return false
		}
		if c == ' ' {
			if prevSpace {
				return false
			}
			prevSpace = true
		} else {
			prevSpace = false
		}
	}
	return true
}

// isCleanUnicode is isClean for text with non-ASCII characters.
func isCleanUnicode(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	prevSpace := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			if r != ' ' || prevSpace {
				return false
			}
			prevSpace = true
			continue
		}
		prevSpace = false
		if isControl(r) {
			return false
		}
	}
	return true
}

// isControl reports control (Cc) and format (Cf: zero-width, bidi override)
// characters, and the line and paragraph separators.
func isControl(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) ||
		r == '\u2028' || r == '\u2029'
}

// cutBytes returns s cut to at most max bytes at a character boundary.
func cutBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// capRunes cuts s to at most n characters, for error messages.
func capRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + Ellipsis
		}
		i++
	}
	return s
}

// quoteID quotes an id for an error message, capped at 100 characters.
func quoteID(id string) string {
	return fmt.Sprintf("%q", capRunes(id, 100))
}
