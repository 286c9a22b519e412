package router

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/quiver-mcp/quiver/catalog"
)

// This file groups the tools of one namespace into named clusters for the
// ChoiceGraph. The algorithm, per group of tools that exceeds the fan-out
// cap (a namespace, or a cluster that is itself too large):
//
//  1. Every tool is described by terms: the words of its id name (split at
//     '_', '-', '.', spaces, and at camelCase when the name has no other
//     separator; lower-cased; plurals reduced), minus stop words, with
//     generic action verbs (get, list, create, ...) kept apart; and the
//     words of its card description, minus stop words, verbs, words about
//     call mechanics (array, parameter, result, ...) and words that more
//     than a tenth of the namespace's descriptions use. Terms shared by
//     every tool of the group, the namespace's and server's own words and
//     the terms of enclosing clusters are excluded: they do not
//     discriminate.
//  2. Clusters are picked greedily, one term at a time, from the tools not
//     yet placed. A term's cluster is every remaining tool with the term in
//     its name (for a description word: in its name or description). Terms
//     are tried in phases, most meaningful first:
//     (a) head terms: the first informative word of a name (the object of
//     "list_issues", the service of "keyvault_secret_get"), ranked by how
//     many tools it heads; (b) any name word, ranked by how many tools carry
//     it; (c) description words (only while the group still exceeds the
//     cap); (d) action verbs (likewise). A term qualifies when its cluster
//     has at least 2 tools (3 once the group already fits the cap) and at
//     most max(60% of the group, min(cap, group-1)) tools, so that no
//     cluster swallows its whole group.
//  3. Picking continues while there are qualifying terms and fewer than
//     cap-1 clusters. Tools left over stay directly under the group when
//     everything fits; otherwise they go to one "other" cluster.
//  4. Clusters with more tools than the cap are split again the same way.
//  5. Only when no term splits a group at all are its tools cut into
//     alphabetical chunks (a fallback, counted in GraphStats.Fallbacks).
//
// Cluster names are the picked term, joined with up to two other name words
// every member shares ("pull-request", "global-security-advisory"), in the
// order they appear in the names.
//
// All of it is deterministic: tools are processed in id order, maps are
// only used for lookups and counts, and every tie is broken by term order.

// otherSegment names the cluster of tools that no term grouped.
const otherSegment = "other"

// gtool is one tool as the clusterer sees it.
type gtool struct {
	item    *catalog.Item
	name    []string          // informative name terms, in name order, distinct
	verbs   []string          // action-verb terms of the name, distinct
	desc    []string          // informative description terms, distinct
	surface map[string]string // term -> surface form (first spelling in the name, else description)
}

func (t *gtool) hasName(term string) bool { return slices.Contains(t.name, term) }
func (t *gtool) hasVerb(term string) bool { return slices.Contains(t.verbs, term) }
func (t *gtool) hasDesc(term string) bool { return slices.Contains(t.desc, term) }
func (t *gtool) id() string               { return t.item.ID }

func (t *gtool) hasAny(term string) bool {
	return t.hasName(term) || t.hasDesc(term) || t.hasVerb(term)
}

// termSet is a set of terms.
type termSet map[string]bool

func newTermSet() termSet { return termSet{} }

func (s termSet) add(terms ...string) {
	for _, t := range terms {
		s[t] = true
	}
}

func (s termSet) clone() termSet {
	c := make(termSet, len(s))
	for t := range s {
		c[t] = true
	}
	return c
}

// newGTool derives the terms of one item.
func newGTool(it *catalog.Item) *gtool {
	t := &gtool{item: it, surface: map[string]string{}}
	name := it.Canonical.Name
	if name == "" {
		name = it.UpstreamName
	}
	for _, w := range graphWords(name, !strings.ContainsAny(name, "_-. /:")) {
		stem := graphStem(w)
		switch {
		case isGraphStopWord(stem) || isGraphStopWord(w) || !graphUsefulTerm(stem):
			continue
		case isGraphVerb(stem) || isGraphVerb(w):
			if !slices.Contains(t.verbs, stem) {
				t.verbs = append(t.verbs, stem)
			}
		case !slices.Contains(t.name, stem):
			t.name = append(t.name, stem)
		}
		if _, ok := t.surface[stem]; !ok {
			t.surface[stem] = w
		}
	}
	for _, w := range graphWords(it.Card.Description, false) {
		stem := graphStem(w)
		if isGraphStopWord(stem) || isGraphStopWord(w) || isGraphVerb(stem) || isGraphVerb(w) ||
			isGraphDescNoise(stem) || !graphUsefulTerm(stem) {
			continue
		}
		if !slices.Contains(t.name, stem) && !slices.Contains(t.desc, stem) {
			t.desc = append(t.desc, stem)
		}
		if _, ok := t.surface[stem]; !ok {
			t.surface[stem] = w
		}
	}
	return t
}

// group is one cluster proposed by partition.
type group struct {
	name    string   // desired segment
	members []*gtool // in id order
	excl    termSet  // terms excluded inside the cluster
	how     clusterHow
}

// clusterHow says how a cluster was made.
type clusterHow int

const (
	byName        clusterHow = iota // a name term (head or any position)
	byDescription                   // a description term
	byVerb                          // an action verb of the names
	byOther                         // the leftovers
	byAlphabet                      // an alphabetical chunk (fallback)
)

// partition splits ms (more than max tools, in id order) into at most max
// parts: clusters and loose tools. excl are the terms that must not be
// picked (namespace words, enclosing cluster terms).
func partition(ms []*gtool, excl termSet, max int) (groups []group, loose []*gtool) {
	n := len(ms)
	excl = excl.clone()
	// Terms every tool of the group carries do not discriminate.
	for _, term := range commonTerms(ms) {
		excl[term] = true
	}
	maxCov := (n*6 + 9) / 10
	maxCov = bigger(maxCov, min(max, n-1))
	maxCov = min(maxCov, n-1)

	rest := ms
	for len(rest) > 0 && len(groups) < max-1 {
		fits := len(groups)+len(rest) <= max
		minSize := 2
		if fits {
			minSize = 3
		}
		term, members, how, ok := pickTerm(rest, excl, maxCov, minSize, fits)
		if !ok {
			break
		}
		sub := excl.clone()
		sub[term] = true
		groups = append(groups, group{name: clusterName(term, members, excl), members: members, excl: sub, how: how})
		rest = slices.DeleteFunc(slices.Clone(rest), func(t *gtool) bool { return slices.Contains(members, t) })
	}
	if len(groups)+len(rest) <= max {
		return groups, rest
	}
	if len(groups) == 0 {
		return alphaChunks(rest, excl, max), nil
	}
	return append(groups, group{name: otherSegment, members: rest, excl: excl, how: byOther}), nil
}

// pickTerm returns the best cluster term among rest and its members, by
// the phases described at the top of this file.
func pickTerm(rest []*gtool, excl termSet, maxCov, minSize int, fits bool) (string, []*gtool, clusterHow, bool) {
	ok := func(cov int) bool { return cov >= minSize && cov <= maxCov }
	members := func(has func(*gtool) bool) []*gtool {
		var m []*gtool
		for _, t := range rest {
			if has(t) {
				m = append(m, t)
			}
		}
		return m
	}
	type cand struct {
		term      string
		head, cov int
	}
	best := func(cs []cand) (cand, bool) {
		var b cand
		found := false
		for _, c := range cs {
			if !found || c.head > b.head || c.head == b.head && (c.cov > b.cov || c.cov == b.cov && c.term < b.term) {
				b, found = c, true
			}
		}
		return b, found
	}

	// (a) head terms and (b) any name term.
	heads := map[string]int{}
	covs := map[string]int{}
	for _, t := range rest {
		headSeen := false
		for _, term := range t.name {
			if excl[term] {
				continue
			}
			if !headSeen {
				heads[term]++
				headSeen = true
			}
			covs[term]++
		}
	}
	var cs []cand
	for term, h := range heads {
		if h >= 2 && ok(covs[term]) {
			cs = append(cs, cand{term: term, head: h, cov: covs[term]})
		}
	}
	if c, found := best(cs); found {
		return c.term, members(func(t *gtool) bool { return t.hasName(c.term) }), byName, true
	}
	cs = cs[:0]
	for term, cov := range covs {
		if ok(cov) {
			cs = append(cs, cand{term: term, cov: cov})
		}
	}
	if c, found := best(cs); found {
		return c.term, members(func(t *gtool) bool { return t.hasName(c.term) }), byName, true
	}
	if fits {
		return "", nil, 0, false
	}

	// (c) description terms, then (d) action verbs.
	for _, phase := range []struct {
		how   clusterHow
		terms func(*gtool) []string
		has   func(*gtool, string) bool
	}{
		{byDescription, func(t *gtool) []string { return t.desc }, func(t *gtool, s string) bool { return t.hasName(s) || t.hasDesc(s) }},
		{byVerb, func(t *gtool) []string { return t.verbs }, (*gtool).hasVerb},
	} {
		covs := map[string]int{}
		for _, t := range rest {
			for _, term := range phase.terms(t) {
				if !excl[term] {
					covs[term]++
				}
			}
		}
		cs = cs[:0]
		for term := range covs {
			// A description term also counts the tools that carry it in
			// their name.
			cov := 0
			for _, t := range rest {
				if phase.has(t, term) {
					cov++
				}
			}
			if ok(cov) {
				cs = append(cs, cand{term: term, cov: cov})
			}
		}
		if c, found := best(cs); found {
			return c.term, members(func(t *gtool) bool { return phase.has(t, c.term) }), phase.how, true
		}
	}
	return "", nil, 0, false
}

// commonTerms returns the terms (of any kind) every tool of ms carries.
func commonTerms(ms []*gtool) []string {
	if len(ms) == 0 {
		return nil
	}
	var out []string
	first := ms[0]
	for _, list := range [][]string{first.name, first.verbs, first.desc} {
		for _, term := range list {
			all := true
			for _, t := range ms[1:] {
				if !t.hasAny(term) {
					all = false
					break
				}
			}
			if all {
				out = append(out, term)
			}
		}
	}
	return out
}

// clusterName names a cluster picked by term: the term followed, in name
// order, by up to two other name terms every member shares, joined by '-'.
// Each term is spelled as most members spell it.
func clusterName(term string, members []*gtool, excl termSet) string {
	words := []string{term}
	for _, other := range members[0].name {
		if other == term || excl[other] || len(words) == 3 {
			continue
		}
		shared := true
		for _, t := range members[1:] {
			if !t.hasName(other) {
				shared = false
				break
			}
		}
		if shared {
			words = append(words, other)
		}
	}
	// Order by position in the first member's name.
	pos := func(w string) int {
		if i := slices.Index(members[0].name, w); i >= 0 {
			return i
		}
		return -1
	}
	slices.SortStableFunc(words, func(a, b string) int { return cmp.Compare(pos(a), pos(b)) })
	for i, w := range words {
		words[i] = spelling(w, members)
	}
	return fitSegment(strings.Join(words, "-"), "group")
}

// spelling returns the most common surface form of term among members
// (ties: the shortest, then the smallest).
func spelling(term string, members []*gtool) string {
	counts := map[string]int{}
	for _, t := range members {
		if s, ok := t.surface[term]; ok {
			counts[s]++
		}
	}
	best, bestN := term, 0
	for s, n := range counts {
		if n > bestN || n == bestN && (len(s) < len(best) || len(s) == len(best) && s < best) {
			best, bestN = s, n
		}
	}
	return best
}

// alphaChunks cuts ms (in id order) into at most max alphabetical chunks of
// near-equal size, named after their first and last leaf segments.
func alphaChunks(ms []*gtool, excl termSet, max int) []group {
	sorted := slices.Clone(ms)
	slices.SortStableFunc(sorted, func(a, b *gtool) int {
		return cmp.Or(strings.Compare(leafSegment(a.item), leafSegment(b.item)), strings.Compare(a.id(), b.id()))
	})
	size := bigger(max, (len(sorted)+max-1)/max)
	chunks := (len(sorted) + size - 1) / size
	if chunks < 2 {
		chunks = 2
	}
	var out []group
	for i := 0; i < chunks; i++ {
		lo, hi := i*len(sorted)/chunks, (i+1)*len(sorted)/chunks
		part := sorted[lo:hi]
		if len(part) == 0 {
			continue
		}
		first, last := leafSegment(part[0].item), leafSegment(part[len(part)-1].item)
		name := fitSegment(cutSeg(first, 30)+"--"+cutSeg(last, 30), "part-"+strconv.Itoa(i+1))
		out = append(out, group{name: name, members: part, excl: excl, how: byAlphabet})
	}
	return out
}

func cutSeg(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func bigger(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// leafSegment derives a tool's path segment from its id name: lower-cased,
// every character outside [a-z0-9_-] turned into '_', leading '_' and '-'
// trimmed, cut to 64 bytes; "tool" when nothing is left.
func leafSegment(it *catalog.Item) string {
	name := it.Canonical.Name
	if name == "" {
		name = it.UpstreamName
	}
	return fitSegment(name, "tool")
}

// fitSegment fits s to the segment grammar (see leafSegment), or returns
// fallback when nothing of s survives.
func fitSegment(s, fallback string) string {
	b := make([]byte, 0, min(len(s), maxSegmentBytes))
	for i := 0; i < len(s) && len(b) < maxSegmentBytes; i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			if c >= 0x80 { // skip the rest of a multi-byte character
				for i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
					i++
				}
			}
			c = '_'
		}
		if len(b) == 0 && (c == '_' || c == '-') {
			continue
		}
		b = append(b, c)
	}
	if len(b) == 0 {
		return fallback
	}
	return string(b)
}

// uniqueSegments makes the segments of one node's children unique, in the
// given order (clusters first, then tools, each in a deterministic order):
// a repeated segment gets the first free suffix "-2", "-3", ...
func uniqueSegments(segs []string) []string {
	used := make(map[string]bool, len(segs))
	out := make([]string, len(segs))
	for i, s := range segs {
		if !used[s] {
			used[s] = true
			out[i] = s
			continue
		}
		for k := 2; ; k++ {
			suf := "-" + strconv.Itoa(k)
			base := s
			if len(base)+len(suf) > maxSegmentBytes {
				base = base[:maxSegmentBytes-len(suf)]
			}
			if c := base + suf; !used[c] {
				used[c] = true
				out[i] = c
				break
			}
		}
	}
	return out
}

// graphWords splits s into lower-case ASCII words: runs of letters and
// digits; with camel, further split at camelCase boundaries ("getPythPrice"
// -> get, pyth, price; "HTTPServer" -> http, server; "DAGs" stays one word).
// Other bytes (including all non-ASCII text) separate words. Names are
// camel-split only when they have no other separator, so that brand names
// in "GitHub_Issues" or prose stay whole.
func graphWords(s string, camel bool) []string {
	var out []string
	isUp := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	isLo := func(c byte) bool { return c >= 'a' && c <= 'z' }
	isDig := func(c byte) bool { return c >= '0' && c <= '9' }
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToLower(s[start:end]))
		}
		start = -1
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isUp(c) || isLo(c) || isDig(c)) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		if !camel {
			continue
		}
		p := s[i-1]
		switch {
		case isUp(c) && (isLo(p) || isDig(p)):
			flush(i) // fooBar, v2Beta
			start = i
		case isUp(c) && isUp(p) && i+1 < len(s) && isLo(s[i+1]):
			// HTTPServer: split before the S, but not in "DAGs" (a
			// trailing plural 's').
			if !(s[i+1] == 's' && (i+2 == len(s) || !isLo(s[i+2]))) {
				flush(i)
				start = i
			}
		}
	}
	flush(len(s))
	return out
}

// graphStem reduces an English plural to its singular, crudely but
// deterministically: entries -> entry, matches -> match, issues -> issue;
// words in -ss, -us and -is are kept.
func graphStem(w string) string {
	n := len(w)
	switch {
	case n <= 3:
		return w
	case strings.HasSuffix(w, "ies") && n > 4:
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "xes"):
		return w[:n-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "s"):
		return w[:n-1]
	}
	return w
}

// graphUsefulTerm reports whether a word can name a cluster: two or more
// characters, not only digits.
func graphUsefulTerm(w string) bool {
	if len(w) < 2 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return true
		}
	}
	return false
}

// isGraphStopWord reports words that never form clusters: function words
// and words that say nothing about what a tool is about.
func isGraphStopWord(w string) bool {
	switch w {
	case "a", "an", "the", "and", "or", "of", "to", "for", "in", "on", "by", "with", "from", "at", "as",
		"is", "are", "be", "been", "it", "its", "this", "that", "these", "those", "into", "via", "using",
		"use", "used", "all", "any", "some", "each", "every", "new", "my", "me", "your", "you", "our",
		"can", "will", "not", "no", "if", "only", "also", "specific", "given", "based", "about", "which",
		"when", "where", "what", "who", "how", "than", "then", "there", "their", "them", "they", "other",
		"more", "most", "such", "should", "must", "may", "one", "two", "both", "either", "eg", "etc",
		"tool", "mcp", "api", "info", "information", "detail", "details", "data", "provided", "optional",
		"optionally", "default", "including", "include", "within", "without", "whether", "so", "do",
		"does", "has", "have", "current", "id", "name", "multiple", "single", "particular", "available":
		return true
	}
	return false
}

// isGraphDescNoise reports words of descriptions that speak of the call
// mechanics (arrays, parameters, results) rather than of the subject.
func isGraphDescNoise(w string) bool {
	switch w {
	case "array", "object", "json", "string", "boolean", "number", "integer", "response", "result",
		"value", "format", "field", "parameter", "param", "argument", "arg", "option", "command",
		"output", "input", "request", "call", "function", "method", "operation", "example", "type",
		"note", "please", "like", "e", "g", "ie", "instead", "otherwise", "always", "never":
		return true
	}
	return false
}

// isGraphVerb reports generic actions: they group tools by what they do
// rather than by what they are about, so they form clusters only as a last
// resort. Words that are also common nouns of tool names (run, post, test,
// request, deploy, sync) are deliberately absent.
func isGraphVerb(w string) bool {
	switch w {
	case "get", "list", "create", "update", "delete", "set", "add", "remove", "read", "write", "search",
		"find", "fetch", "show", "view", "browse", "query", "retrieve", "describe", "check", "start",
		"stop", "send", "upload", "download", "edit", "modify", "open", "close", "enable", "disable",
		"generate", "make", "execute", "manage", "mark", "submit", "insert", "save", "load", "clear",
		"reset", "apply", "move", "copy", "rename", "validate", "lookup", "count", "parse", "convert",
		"trigger", "cancel", "publish", "unpublish", "approve", "reject", "invite", "join", "leave",
		"export", "import", "ban", "unban", "block", "unblock", "pin", "unpin", "mute", "unmute",
		"archive", "unarchive", "promote", "demote", "resolve", "unresolve", "assign", "unassign",
		"merge", "fork", "star", "unstar", "dismiss", "analyze", "calculate", "compare", "explain",
		"evaluate", "install", "uninstall", "register", "deregister", "unregister", "connect",
		"disconnect", "attach", "detach", "push", "replace", "reply", "forward", "refresh", "restart",
		"scale", "abort", "rebuild", "finish", "notify", "interact", "perform", "handle", "put", "patch",
		"return", "provide", "allow", "support", "display", "configure", "toggle":
		return true
	}
	return false
}

// dropGenericDesc removes from the description terms of one namespace's
// tools those that too many of its descriptions use ("command",
// "subscription" in a cloud provider's tools): more than a tenth of the
// tools, and at least 5. Such words describe the namespace, not a group.
func dropGenericDesc(ms []*gtool) {
	df := map[string]int{}
	for _, t := range ms {
		for _, term := range t.desc {
			df[term]++
		}
	}
	limit := bigger(5, len(ms)/10+1)
	for _, t := range ms {
		t.desc = slices.DeleteFunc(t.desc, func(term string) bool { return df[term] >= limit })
	}
}
