package router

import (
	_ "embed"
	"strings"
)

// wordnetTable is a compact table derived from WordNet 3.0 by
// router/internal/wngen (see there for what it holds); WordNet's license is
// in wordnet.LICENSE. One line per word: word, synonyms, derived forms,
// hypernyms, tab-separated, each a comma-separated list.
//
//go:embed wordnet.txt
var wordnetTable string

// wordnetExpansions reads wordnetTable into expansions: synonyms with
// weight 1, derived forms with weight der, hypernyms with weight hyp (0
// leaves a relation out), keeping only alternatives the catalog holds
// (known). The table's words are lemmas, as the plural-stemming analyzer
// leaves most nouns and as verbs stay.
func wordnetExpansions(der, hyp float64, known func(string) bool) expansions {
	e := expansions{}
	weights := [3]float64{1, der, hyp}
	for line := range strings.Lines(wordnetTable) {
		cols := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(cols) != 4 {
			continue
		}
		for i, w := range weights {
			if w <= 0 || cols[i+1] == "" {
				continue
			}
			for alt := range strings.SplitSeq(cols[i+1], ",") {
				if known(alt) {
					e.add(cols[0], alt, w)
				}
			}
		}
	}
	return e
}
