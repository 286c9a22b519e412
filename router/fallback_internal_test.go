package router

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
)

// trigramHitsRef is trigramHits as first written (a map of trigram arrays,
// every item scored and sorted): the reference the faster scan is held to.
func (x *Index) trigramHitsRef(q string, k int, visible Visible) []Hit {
	grams := map[[3]byte]int{}
	eachTrigram(q, func(g [3]byte) {
		if _, ok := grams[g]; !ok {
			grams[g] = len(grams)
		}
	})
	type scored struct {
		it    *catalog.Item
		score float64
	}
	all := make([]scored, 0, len(x.items))
	mark := make([]int, len(grams))
	for i := range mark {
		mark[i] = -1
	}
	n := 0
	for _, it := range x.items {
		found := 0
		if len(grams) > 0 {
			see := func(g [3]byte) {
				if j, ok := grams[g]; ok && mark[j] != n {
					mark[j] = n
					found++
				}
			}
			eachTrigram(it.UpstreamName, see)
			eachTrigram(it.Server, see)
			for _, t := range it.Card.Tags {
				eachTrigram(t, see)
			}
			d := it.Card.Description
			if len(d) > trigramDescBytes {
				d = d[:trigramDescBytes]
			}
			eachTrigram(d, see)
		}
		n++
		s := 0.0
		if len(grams) > 0 {
			s = float64(found) / float64(len(grams))
		}
		all = append(all, scored{it, s})
	}
	slices.SortFunc(all, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.it.ID, b.it.ID)
	})
	var out []Hit
	for _, s := range all {
		if len(out) == k {
			break
		}
		if visible == nil || visible(s.it) {
			out = append(out, Hit{Item: s.it, Score: s.score})
		}
	}
	return out
}

func TestTrigramHitsMatchReference(t *testing.T) {
	var defs []catalog.ToolDef
	for i := range 60 {
		defs = append(defs, tool(fmt.Sprintf("srv%d", i%9), fmt.Sprintf("%s_%d", []string{"weather", "forecast", "read_file", "send_mail", "créer_note"}[i%5], i),
			[]string{"Get the weather.", "Send an email message.", "Lire un fichier.", "", "Résumé du jour 日本"}[i%5]))
	}
	x, err := newIndex(smallItems(t, defs...), defaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	hide := func(it *catalog.Item) bool {
		h := fnv.New32a()
		h.Write([]byte(it.ID))
		return h.Sum32()%3 != 0
	}
	for _, q := range []string{"wheather", "qqxq zzvq", "mail sned", "fichier", "日本", "ab", "", "srv3 forecst", "créer"} {
		for _, k := range []int{1, 5, 10, 100} {
			for _, vis := range []Visible{nil, hide, func(*catalog.Item) bool { return false }} {
				got, want := x.trigramHits(q, k, vis), x.trigramHitsRef(q, k, vis)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%q k=%d: got %v, want %v", q, k, got, want)
				}
			}
		}
	}
}
