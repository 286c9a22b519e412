package router

import (
	"container/list"
	"slices"
	"strings"
	"sync"

	"github.com/quiver-mcp/quiver/choicecard"
)

// CacheBreakpointID is the id of the marker card that separates the
// already-seen prefix of a cache-stable browse answer from its new cards
// (spec 003 §5.1).
const CacheBreakpointID = "__cache_breakpoint__"

// DefaultMaxSeen bounds the seen set of a StableView.
const DefaultMaxSeen = 4096

// CacheBreakpoint returns the marker card: kind internal, id
// CacheBreakpointID. Downstream serialisers put their prompt-cache
// breakpoint where it appears.
func CacheBreakpoint() choicecard.Card {
	return choicecard.Card{
		ID:          CacheBreakpointID,
		Name:        "cache breakpoint",
		Description: "Cards above were shown earlier in this session; cards below are new.",
		Tags:        []string{},
		Kind:        choicecard.KindInternal,
	}
}

// StableView is the cache-stable browse state of one session (spec 003 §5):
// the ids the session has browsed or successfully hydrated, each with the
// card content frozen at its first sighting in a browse. It is safe for
// concurrent use by the requests of its session.
//
// The seen set holds at most its bound (DefaultMaxSeen unless given):
// beyond it the least recently browsed or hydrated id is forgotten, and
// reappears later as a new card (a cache miss, never a wrong answer).
type StableView struct {
	mu   sync.Mutex
	max  int
	lru  *list.List // of *seenCard; front = most recently used
	byID map[string]*list.Element
}

// seenCard is one entry of the seen set.
type seenCard struct {
	id     string
	card   choicecard.Card
	frozen bool // card holds the content of the first sighting
}

// NewStableView returns an empty view whose seen set holds at most maxSeen
// ids (0 or less means DefaultMaxSeen).
func NewStableView(maxSeen int) *StableView {
	if maxSeen <= 0 {
		maxSeen = DefaultMaxSeen
	}
	return &StableView{max: maxSeen, lru: list.New(), byID: map[string]*list.Element{}}
}

// Apply reorders one browse answer per spec 003 §5.1 and records it:
//
//   - cards whose id is in the seen set come first, by id ascending, each
//     re-emitted exactly as it was at its first sighting (score included);
//   - then the CacheBreakpoint card, only when both the seen prefix and the
//     new suffix are non-empty (§5.3);
//   - then the new cards, by id ascending, as given.
//
// Afterwards every id of cards is in the seen set and the content of each
// new card is frozen. A repeated id is kept once (its first occurrence);
// an input card with the marker's id is dropped. The returned cards do not
// share memory with the input or the view.
func (v *StableView) Apply(cards []choicecard.Card) []choicecard.Card {
	v.mu.Lock()
	defer v.mu.Unlock()
	var seen, fresh []choicecard.Card
	inCall := make(map[string]bool, len(cards))
	for _, c := range cards {
		if c.ID == CacheBreakpointID || inCall[c.ID] {
			continue
		}
		inCall[c.ID] = true
		if el, ok := v.byID[c.ID]; ok {
			e := el.Value.(*seenCard)
			if !e.frozen { // hydrated before, browsed now: first sighting
				e.card, e.frozen = cloneCard(c), true
			}
			v.lru.MoveToFront(el)
			seen = append(seen, cloneCard(e.card))
			continue
		}
		fresh = append(fresh, cloneCard(c))
	}
	byID := func(a, b choicecard.Card) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(seen, byID)
	slices.SortFunc(fresh, byID)
	for _, c := range fresh {
		v.insert(&seenCard{id: c.ID, card: cloneCard(c), frozen: true})
	}
	out := make([]choicecard.Card, 0, len(seen)+len(fresh)+1)
	out = append(out, seen...)
	if len(seen) > 0 && len(fresh) > 0 {
		out = append(out, CacheBreakpoint())
	}
	return append(out, fresh...)
}

// MarkHydrated adds id to the seen set after a successful hydration (a
// failed one must not be recorded, §5.5). The card content is frozen at
// the id's first sighting in a browse, not here.
func (v *StableView) MarkHydrated(id string) {
	if id == "" || id == CacheBreakpointID {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if el, ok := v.byID[id]; ok {
		v.lru.MoveToFront(el)
		return
	}
	v.insert(&seenCard{id: id})
}

// Len returns the number of ids in the seen set.
func (v *StableView) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lru.Len()
}

// insert adds a new entry as the most recent one and evicts the least
// recently used entries beyond the bound. The caller holds mu.
func (v *StableView) insert(e *seenCard) {
	v.byID[e.id] = v.lru.PushFront(e)
	for v.lru.Len() > v.max {
		old := v.lru.Back()
		v.lru.Remove(old)
		delete(v.byID, old.Value.(*seenCard).id)
	}
}
