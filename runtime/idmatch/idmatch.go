// Package idmatch matches the tool names callers type against catalog ids:
// the short forms a caller may give instead of a full tool_id
// ("server:name" without "#hash8", or a proxy listing's name without its
// digest), and a ranking of ids by how close they are to a name that
// matched nothing, for "did you mean" suggestions.
//
// It knows only strings: which ids a caller may see is decided by the
// caller of Rank, which must filter before it shows anything.
package idmatch

import (
	"cmp"
	"slices"
	"strings"
	"unicode"

	"github.com/quiver-mcp/quiver/internal/editdist"
)

// MaxRef bounds the names Rank compares; longer names are not ranked
// (a tool_id is at most toolid.MaxLen characters).
const MaxRef = 256

// Keys returns the short names a tool is also known by: its id without
// the "#hash8" and "~N" suffixes ("ns:name" or "ns:name@version"), its
// namespace and name without the version ("ns:name"), and the same joined
// by "." as a proxy listing joins them ("ns.name").
func Keys(namespace, name, version string) []string {
	keys := []string{namespace + ":" + name, namespace + "." + name}
	if version != "" {
		keys = append(keys, namespace+":"+name+"@"+version)
	}
	return keys
}

// IsShort reports whether ref may be a short name: it carries no "#"
// (a full tool_id carries its hash8).
func IsShort(ref string) bool {
	return ref != "" && len(ref) <= MaxRef && !strings.Contains(ref, "#")
}

// Rank returns the ids closest to ref, best first, at most n of them; ids
// with nothing in common with ref are left out. Ties are broken by id, so
// the answer is stable.
func Rank(ref string, ids []string, n int) []string {
	if n <= 0 || ref == "" || len(ref) > MaxRef {
		return nil
	}
	r := normalize(ref)
	rt := tokens(r)
	type scored struct {
		id    string
		score float64
	}
	var out []scored
	for _, id := range ids {
		s := similarity(r, rt, normalize(id))
		if s >= minSimilarity {
			out = append(out, scored{id, s})
		}
	}
	slices.SortFunc(out, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	ranked := make([]string, 0, min(n, len(out)))
	for _, s := range out {
		if len(ranked) == n {
			break
		}
		ranked = append(ranked, s.id)
	}
	return ranked
}

// Ranked is Rank without a bound: every id with something in common with
// ref, best first, for a caller that filters as it takes.
func Ranked(ref string, ids []string) []string { return Rank(ref, ids, len(ids)) }

// minSimilarity is the score below which an id is no suggestion: half the
// characters edited and no word shared.
const minSimilarity = 0.5

// similarity scores candidate c against the normalized ref r (with its
// tokens rt): the better of the edit-distance similarity and the share of
// r's words c has, in [0, 1].
func similarity(r string, rt []string, c string) float64 {
	longer := max(len(r), len(c))
	if longer == 0 {
		return 0
	}
	edit := 1 - float64(editdist.Levenshtein(r, c))/float64(longer)
	shared := 0
	ct := tokens(c)
	for _, t := range rt {
		if slices.Contains(ct, t) {
			shared++
		}
	}
	overlap := 0.0
	if len(rt) > 0 {
		overlap = float64(shared) / float64(max(len(rt), len(ct)))
	}
	return max(edit, overlap)
}

// normalize lowers s and drops an id's "#hash8" and "~N" suffixes, which a
// caller never types.
func normalize(s string) string {
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '~'); i >= 0 {
		s = s[:i]
	}
	return strings.ToLower(s)
}

// tokens splits s into its words at separators (":", ".", "_", "-", "@",
// "/", spaces).
func tokens(s string) []string {
	return strings.FieldsFunc(s, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) })
}
