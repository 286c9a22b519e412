package benchmarks

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
)

// LoadCatalog reads and ingests a catalog file leniently (items with error
// findings are kept and flagged, as a serving gateway would).
func LoadCatalog(path string) (*catalog.Snapshot, error) {
	src, err := loadSource(path)
	if err != nil {
		return nil, err
	}
	return IngestSource(src)
}

func loadSource(path string) (catalog.Source, error) {
	src, err := catalog.LoadFile(path)
	if err != nil {
		return catalog.Source{}, fmt.Errorf("load catalog: %w", err)
	}
	return src, nil
}

// IngestSource ingests src leniently with the default card builder.
func IngestSource(src catalog.Source) (*catalog.Snapshot, error) {
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		return nil, fmt.Errorf("card builder: %w", err)
	}
	snap, _, err := catalog.Ingest(src, catalog.Options{Cards: cards})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	return snap, nil
}

// Synthesize returns a catalog scale times the size of src: src itself,
// then scale-1 clones of every server under a new name (the server name
// plus a seeded pseudo-word, so a clone of "Trends Hub" is e.g. "Trends Hub
// Vokari"). A clone keeps every tool's name and input schema and perturbs
// its description: each word is dropped with probability 0.15 and adjacent
// words are swapped with probability 0.05. The result depends only on src,
// scale and seed. The original tools keep their servers, so labelled golds
// still resolve. origin maps each clone server name to its original.
func Synthesize(src catalog.Source, scale int, seed uint64) (out catalog.Source, origin map[string]string) {
	out = catalog.Source{Tools: make([]catalog.ToolDef, 0, len(src.Tools)*max(scale, 1))}
	out.Tools = append(out.Tools, src.Tools...)
	origin = map[string]string{}
	taken := map[string]bool{}
	for _, t := range src.Tools {
		taken[t.Server] = true
	}
	for c := 1; c < scale; c++ {
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		names := map[string]string{} // server -> clone name
		for _, t := range src.Tools {
			name, ok := names[t.Server]
			if !ok {
				name = strings.TrimSpace(t.Server + " " + pseudoWord(rng))
				for taken[name] { // a rare repeat of a pseudo-word
					name += " " + pseudoWord(rng)
				}
				taken[name] = true
				names[t.Server] = name
				origin[name] = t.Server
			}
			t.Server = name
			t.Description = perturb(rng, t.Description)
			t.Annotations, t.Meta, t.Result = nil, nil, nil
			out.Tools = append(out.Tools, t)
		}
	}
	return out, origin
}

// pseudoWord returns a capitalised word of 2-3 random syllables.
func pseudoWord(rng *rand.Rand) string {
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	var b strings.Builder
	for i := range 2 + rng.IntN(2) {
		c := cons[rng.IntN(len(cons))]
		if i == 0 {
			c -= 'a' - 'A'
		}
		b.WriteByte(c)
		b.WriteByte(vows[rng.IntN(len(vows))])
	}
	return b.String()
}

// perturb drops and swaps words of a description.
func perturb(rng *rand.Rand, s string) string {
	ws := strings.Fields(s)
	kept := ws[:0:0]
	for _, w := range ws {
		if rng.Float64() < 0.15 {
			continue
		}
		kept = append(kept, w)
	}
	for i := 0; i+1 < len(kept); i++ {
		if rng.Float64() < 0.05 {
			kept[i], kept[i+1] = kept[i+1], kept[i]
		}
	}
	return strings.Join(kept, " ")
}
