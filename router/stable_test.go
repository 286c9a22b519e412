package router

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiver-mcp/quiver/choicecard"
)

func stableCard(id string, score float64, desc string) choicecard.Card {
	return choicecard.Card{ID: id, Name: id, Description: desc, Tags: []string{"t"}, Kind: choicecard.KindTool, Namespace: "ns", HasSchema: true, Score: score}
}

func cardIDs(cs []choicecard.Card) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func TestStableViewSpecExamples(t *testing.T) {
	v := NewStableView(0)
	// First browse: all new, no marker.
	out := v.Apply([]choicecard.Card{stableCard("b", 0.9, "B"), stableCard("a", 0.5, "A")})
	if got := cardIDs(out); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first browse = %v", got)
	}
	// Mixed: seen prefix (frozen content and score), marker, new suffix.
	out = v.Apply([]choicecard.Card{stableCard("c", 0.99, "C"), stableCard("b", 0.1, "B changed")})
	if got := cardIDs(out); !slices.Equal(got, []string{"b", CacheBreakpointID, "c"}) {
		t.Fatalf("mixed browse = %v", got)
	}
	if out[0].Score != 0.9 || out[0].Description != "B" {
		t.Errorf("seen card not frozen: %+v", out[0])
	}
	if out[1].Kind != choicecard.KindInternal {
		t.Errorf("marker kind %q", out[1].Kind)
	}
	if out[2].Score != 0.99 {
		t.Errorf("new card score %v", out[2].Score)
	}
	// All seen: no marker.
	out = v.Apply([]choicecard.Card{stableCard("c", 0.1, "x"), stableCard("a", 0.1, "x")})
	if got := cardIDs(out); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("all-seen browse = %v", got)
	}
	// All new: no marker.
	out = v.Apply([]choicecard.Card{stableCard("e", 1, "E"), stableCard("d", 1, "D")})
	if got := cardIDs(out); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("all-new browse = %v", got)
	}
	// Empty browse.
	if out := v.Apply(nil); len(out) != 0 {
		t.Fatalf("empty browse = %v", cardIDs(out))
	}
	// A hydrated id is seen; its content is frozen at its first browse.
	v.MarkHydrated("h")
	out = v.Apply([]choicecard.Card{stableCard("z", 1, "Z"), stableCard("h", 0.3, "H1")})
	if got := cardIDs(out); !slices.Equal(got, []string{"h", CacheBreakpointID, "z"}) || out[0].Description != "H1" {
		t.Fatalf("hydrated browse = %v %+v", got, out[0])
	}
	out = v.Apply([]choicecard.Card{stableCard("h", 0.8, "H2")})
	if out[0].Description != "H1" || out[0].Score != 0.3 {
		t.Errorf("hydrated card not frozen: %+v", out[0])
	}
	// Duplicates and a forged marker in the input.
	out = v.Apply([]choicecard.Card{stableCard("q", 1, "Q"), stableCard("q", 2, "Q2"), CacheBreakpoint()})
	if got := cardIDs(out); !slices.Equal(got, []string{"q"}) || out[0].Score != 1 {
		t.Errorf("duplicates = %v %+v", got, out)
	}
	// The output does not alias the view.
	out[0].Tags[0] = "mutated"
	if again := v.Apply([]choicecard.Card{stableCard("q", 1, "Q")}); again[0].Tags[0] != "t" {
		t.Error("Apply returned shared tags")
	}
	v.MarkHydrated("")
	v.MarkHydrated(CacheBreakpointID)
	if v.Len() != 8 {
		t.Errorf("Len = %d, want 8", v.Len())
	}
}

func TestStableViewEviction(t *testing.T) {
	v := NewStableView(3)
	v.Apply([]choicecard.Card{stableCard("a", 1, "A")})
	v.Apply([]choicecard.Card{stableCard("b", 1, "B")})
	v.Apply([]choicecard.Card{stableCard("c", 1, "C")})
	v.Apply([]choicecard.Card{stableCard("a", 2, "A2")}) // a is now the most recent
	v.MarkHydrated("d")                                  // evicts b, the least recent
	if v.Len() != 3 {
		t.Fatalf("Len = %d", v.Len())
	}
	out := v.Apply([]choicecard.Card{stableCard("a", 3, "A3"), stableCard("b", 3, "B3")})
	if got := cardIDs(out); !slices.Equal(got, []string{"a", CacheBreakpointID, "b"}) {
		t.Fatalf("after eviction = %v", got)
	}
	if out[0].Description != "A" || out[2].Description != "B3" {
		t.Errorf("contents: %+v", out)
	}
}

// TestStableViewProperties runs random sessions of browses and hydrations
// and checks the §5 rules on every answer.
func TestStableViewProperties(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		maxSeen := DefaultMaxSeen
		if seed%4 == 0 {
			maxSeen = 1 + rng.IntN(8) // exercise eviction
		}
		v := NewStableView(maxSeen)
		model := map[string]string{} // id -> JSON of the frozen card (seen ids only)
		hydrated := map[string]bool{}
		var order []string // ids by last use, most recent last
		touch := func(id string) {
			order = slices.DeleteFunc(order, func(x string) bool { return x == id })
			order = append(order, id)
			for len(order) > maxSeen {
				delete(model, order[0])
				delete(hydrated, order[0])
				order = order[1:]
			}
		}
		pool := 5 + rng.IntN(30)
		for step := range 40 {
			if rng.IntN(5) == 0 {
				id := fmt.Sprintf("ns:tool%02d", rng.IntN(pool))
				v.MarkHydrated(id)
				if _, ok := model[id]; !ok && !hydrated[id] {
					hydrated[id] = true
				}
				touch(id)
				continue
			}
			var in []choicecard.Card
			for range rng.IntN(12) {
				id := fmt.Sprintf("ns:tool%02d", rng.IntN(pool))
				in = append(in, stableCard(id, rng.Float64(), fmt.Sprintf("desc %d %d", step, rng.IntN(3))))
			}
			out := v.Apply(in)
			ctx := fmt.Sprintf("seed %d step %d", seed, step)

			// Expected partition of the distinct input ids.
			first := map[string]choicecard.Card{}
			var ids []string
			for _, c := range in {
				if _, ok := first[c.ID]; !ok {
					first[c.ID] = c
					ids = append(ids, c.ID)
				}
			}
			var wantSeen, wantNew []string
			for _, id := range ids {
				if _, ok := model[id]; ok || hydrated[id] {
					wantSeen = append(wantSeen, id)
				} else {
					wantNew = append(wantNew, id)
				}
			}
			slices.Sort(wantSeen)
			slices.Sort(wantNew)
			want := slices.Clone(wantSeen)
			if len(wantSeen) > 0 && len(wantNew) > 0 {
				want = append(want, CacheBreakpointID)
			}
			want = append(want, wantNew...)
			if got := cardIDs(out); !slices.Equal(got, want) {
				t.Fatalf("%s: order %v, want %v", ctx, got, want)
			}
			markers := 0
			for _, c := range out {
				if c.ID == CacheBreakpointID {
					markers++
					continue
				}
				j, _ := json.Marshal(c)
				if frozen, ok := model[c.ID]; ok {
					if string(j) != frozen {
						t.Fatalf("%s: seen card %s changed:\n%s\n%s", ctx, c.ID, j, frozen)
					}
				} else {
					// New, or hydrated and now first browsed: as given,
					// score preserved.
					fj, _ := json.Marshal(first[c.ID])
					if string(j) != string(fj) {
						t.Fatalf("%s: card %s altered: %s vs %s", ctx, c.ID, j, fj)
					}
				}
			}
			if markers > 1 {
				t.Fatalf("%s: %d markers", ctx, markers)
			}
			// Update the model: seen ids refreshed in recency, new and
			// first-browsed cards frozen, in the view's order (seen ids in
			// input order, then new ids by id).
			for _, id := range ids { // seen ids are refreshed in input order
				if !slices.Contains(wantSeen, id) {
					continue
				}
				if _, ok := model[id]; !ok {
					j, _ := json.Marshal(first[id])
					model[id] = string(j)
					delete(hydrated, id)
				}
				touch(id)
			}
			for _, id := range wantNew {
				j, _ := json.Marshal(first[id])
				model[id] = string(j)
				touch(id)
			}
			if v.Len() != len(order) {
				t.Fatalf("%s: Len %d, model %d", ctx, v.Len(), len(order))
			}
		}
	}
}

func TestStableViewConcurrent(t *testing.T) {
	v := NewStableView(16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("ns:t%d", (g*7+i)%40)
				if i%5 == 0 {
					v.MarkHydrated(id)
					continue
				}
				out := v.Apply([]choicecard.Card{stableCard(id, 1, "d"), stableCard("ns:common", 1, "c")})
				for _, c := range out {
					if strings.HasPrefix(c.ID, "__") && c.ID != CacheBreakpointID {
						t.Errorf("unexpected card %s", c.ID)
					}
				}
			}
		}()
	}
	wg.Wait()
	if v.Len() > 16 {
		t.Errorf("Len %d over the bound", v.Len())
	}
}
