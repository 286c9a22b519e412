// Package choicecard builds, bounds, orders and renders ChoiceCards: the small,
// schema-free descriptions of tools, resources and prompts that quiver shows an
// agent in a browse answer (spec 003 §2).
//
// A Card carries exactly the §2.1 fields and nothing else: no schema, no
// annotations or other metadata maps, no URLs (§2.2). Cards are built from an
// Input by a Builder, which normalises every field (one-line text, a capped
// display name, a sorted and capped tag set with the safety tags reserved) and
// enforces the §2.3 token budgets with exact cl100k_base counts: a card whose
// rendered line exceeds TargetTokens has its description truncated per §2.4,
// and a card that still exceeds HardCapTokens is refused with ErrOverBudget.
//
// Render is the prompt-facing one-line form the budgets apply to, RenderList
// joins cards under a short preamble for a browse answer, and Sort applies the
// §2.5 order (score descending, then id ascending).
//
// Everything here is deterministic: the same Input always yields the same Card
// and the same rendered bytes.
package choicecard

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kind is what a card points at.
type Kind string

// The card kinds. Tool, agent, skill and internal are §2.1's; resource and
// prompt are the §9.4 kinds of resource_browse and prompt_browse cards.
const (
	KindTool     Kind = "tool"
	KindAgent    Kind = "agent"
	KindSkill    Kind = "skill"
	KindInternal Kind = "internal"
	KindResource Kind = "resource"
	KindPrompt   Kind = "prompt"
)

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindTool, KindAgent, KindSkill, KindInternal, KindResource, KindPrompt:
		return true
	}
	return false
}

// Safety is the card's first-class, capping-immune safety class (§2.1). It is
// informational, not an authorization control.
type Safety string

// The safety classes.
const (
	SafetyNone        Safety = ""
	SafetyReadOnly    Safety = "read_only"
	SafetyDestructive Safety = "destructive"
)

// The reserved safety tags. A card's Safety is derived from them (destructive
// wins over read-only) and they are never evicted by the tag cap.
const (
	TagReadOnly    = "read-only"
	TagDestructive = "destructive"
)

// Size bounds of §2.1 and token budgets of §2.3 (exact cl100k_base tokens).
const (
	// MaxNameChars is the longest display name, in characters (runes).
	MaxNameChars = 64
	// MaxTags is the most tags a card carries, safety tags included.
	MaxTags = 5
	// MaxTagChars is the longest tag, in characters (runes).
	MaxTagChars = 24
	// TargetTokens is the per-card budget the description is truncated to.
	TargetTokens = 60
	// HardCapTokens is the per-card limit; a card above it is refused.
	HardCapTokens = 80
	// PreambleTokens bounds the RenderList preamble (with its line break).
	PreambleTokens = 32
)

// Ellipsis is appended to a hard-cut description or display name (U+2026).
const Ellipsis = "…"

// Card is a ChoiceCard. Its fields, and their JSON names, are exactly those of
// spec 003 §2.1; adding one needs a spec amendment. Build cards with a Builder,
// which guarantees the bounds; a Card assembled by hand is rendered as is.
type Card struct {
	// ID is the canonical tool_id (or primitive id) and the sole correlation
	// key for hydrate and execute.
	ID string `json:"id"`
	// Name is the display name, at most MaxNameChars characters.
	Name string `json:"name"`
	// Description is a one-line summary, truncated to the token budget.
	Description string `json:"description"`
	// Tags are sorted, deduplicated, at most MaxTags of at most MaxTagChars
	// characters each. Never nil on a built card.
	Tags []string `json:"tags"`
	// Kind is what the card points at.
	Kind Kind `json:"kind"`
	// Namespace is a copy of the id's namespace.
	Namespace string `json:"namespace"`
	// HasSchema says whether hydration yields an input schema; the schema
	// itself is never on a card.
	HasSchema bool `json:"has_schema"`
	// Score is the routing score. It orders cards (Sort) and is carried in
	// the JSON form only, never rendered. Zero means unscored and is omitted.
	// It must be finite to be marshalled.
	Score float64 `json:"score,omitempty"`
	// CostHint is a relative cost; rendered only when > 0.
	CostHint float64 `json:"cost_hint"`
	// SideEffects says the item changes state; rendered only when true.
	SideEffects bool `json:"side_effects"`
	// Safety mirrors the safety tags (destructive wins over read-only).
	Safety Safety `json:"safety"`
}

// Render returns the card's prompt-facing form, a single line:
//
//	id | name | kind[ | safety][ | side_effects][ | cost=C][ | tags=a,b] | description
//
// Fields in brackets appear only when set: safety when not empty (as
// read_only or destructive), side_effects when true, cost when CostHint > 0,
// tags when there are any besides the one the safety field already states,
// and the description when not empty. The description comes last so that no
// text in it can pose as one of the structured fields before it. Score,
// namespace (already in the id) and has_schema are never rendered.
//
// Render never returns a line break: every field is reduced to one line, so a
// hand-made Card renders safely too.
func Render(c Card) string {
	var b strings.Builder
	b.Grow(len(c.ID) + len(c.Name) + len(c.Description) + 64)
	b.WriteString(oneLine(c.ID))
	b.WriteString(" | ")
	b.WriteString(oneLine(c.Name))
	b.WriteString(" | ")
	b.WriteString(oneLine(string(c.Kind)))
	if c.Safety != SafetyNone {
		b.WriteString(" | ")
		b.WriteString(oneLine(string(c.Safety)))
	}
	if c.SideEffects {
		b.WriteString(" | side_effects")
	}
	if c.CostHint > 0 && !math.IsInf(c.CostHint, 0) {
		b.WriteString(" | cost=")
		b.WriteString(strconv.FormatFloat(c.CostHint, 'g', 4, 64))
	}
	first := true
	for _, t := range c.Tags {
		if (t == TagDestructive && c.Safety == SafetyDestructive) ||
			(t == TagReadOnly && c.Safety == SafetyReadOnly) {
			continue // stated by the safety field
		}
		if first {
			b.WriteString(" | tags=")
			first = false
		} else {
			b.WriteByte(',')
		}
		b.WriteString(oneLine(t))
	}
	if d := oneLine(c.Description); d != "" {
		b.WriteString(" | ")
		b.WriteString(d)
	}
	return b.String()
}

// RenderList renders cards for a browse answer: a one-line preamble naming
// the count and the line format, then one Render line per card, in the given
// order, separated by line breaks. The preamble with its line break costs at
// most PreambleTokens tokens and a built card's line with its line break at
// most HardCapTokens, so the whole answer stays within
// HardCapTokens*len(cards) + PreambleTokens (spec 003 §2.3).
func RenderList(cards []Card) string {
	var b strings.Builder
	b.WriteString(preamble(len(cards)))
	for _, c := range cards {
		b.WriteByte('\n')
		b.WriteString(Render(c))
	}
	return b.String()
}

// preamble is RenderList's first line.
func preamble(n int) string {
	if n == 0 {
		return "0 cards."
	}
	return strconv.Itoa(n) + " cards, one per line: id | name | kind | flags | tags | description"
}

// Compare orders cards per spec 003 §2.5: higher Score first, ties broken by
// ID ascending (byte-wise). A NaN score sorts after every other score.
func Compare(a, b Card) int {
	if c := compareScoreDesc(a.Score, b.Score); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// compareScoreDesc compares scores descending, NaN last.
func compareScoreDesc(x, y float64) int {
	xn, yn := math.IsNaN(x), math.IsNaN(y)
	switch {
	case xn && yn:
		return 0
	case xn:
		return 1
	case yn:
		return -1
	}
	return cmp.Compare(y, x)
}

// Sort orders cards in place per spec 003 §2.5 (see Compare). It is stable,
// so cards equal under Compare (same score and id) keep their input order.
func Sort(cards []Card) {
	slices.SortStableFunc(cards, Compare)
}
