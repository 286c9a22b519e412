package firewall

import (
	"encoding/json"
	"slices"
	"strings"
)

// maxViews caps the suggested views of one envelope.
const maxViews = 12

// minLevel is the summary detail level worth dropping secondary views and
// facts for.
const minLevel = 3

// ranked is a fact or view with its drop priority: higher ranks go first, and
// among equal ranks the later one.
type ranked[T any] struct {
	rank, order int
	cost        int // estimated tokens in the outcome JSON
	v           T
}

// fitSummary builds the summary outcome and fits it in MaxInlineTokens:
// views are dropped first (lowest ranked), then secondary facts, then the
// summary loses detail level by level, and finally it is cut with the token
// counter.
func (f *Firewall) fitSummary(items []*item, digests []digest, handles []string, extra []string, arts []Artifact, st Stats, isError bool) Outcome {
	var facts []ranked[string]
	order := 0
	addFact := func(rank int, s string) {
		facts = append(facts, ranked[string]{rank: rank, order: order, v: s})
		order++
	}
	overall := "original result: " + describeParts(items, true) + ", " + plural(st.OriginalBytes, "byte", "bytes")
	if st.OriginalTokensEstimated {
		overall += ", ≈" + plural(st.OriginalTokens, "token", "tokens") + " (estimated from 16 KiB of samples)"
	} else if st.OriginalTokens > 0 {
		overall += ", " + plural(st.OriginalTokens, "token", "tokens")
	}
	addFact(0, overall)
	var views []ranked[View]
	for i, d := range digests {
		for j, fact := range d.facts {
			addFact(j, fact)
		}
		for j, v := range d.views {
			label := v.label
			if len(digests) > 1 {
				label = d.name + ": " + label
			}
			views = append(views, ranked[View]{rank: j, order: len(views), v: View{Label: label, Selector: v.sel.raw(), Handle: handles[i]}})
		}
	}
	for _, e := range extra {
		addFact(1, e)
	}
	for len(views) > maxViews {
		views, _ = dropLastInto(views, nil)
	}

	head := errorPrefix(isError) + "Too large to inline; stored as " + plural(len(arts), "artifact", "artifacts") +
		" (listed below). Read slices with tool_view(handle, selector); views suggests some.\n"
	summary := func(n int) string {
		var b strings.Builder
		b.WriteString(head)
		for _, d := range digests {
			b.WriteString("[" + d.label + "]\n")
			if d.render != nil {
				b.WriteString(d.render(n))
			}
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	build := func(fs []ranked[string], vs []ranked[View], n int) Outcome {
		o := Outcome{Summary: summary(n), Facts: make([]string, 0, len(fs)), Artifacts: arts, Views: make([]View, 0, len(vs))}
		for _, x := range fs {
			o.Facts = append(o.Facts, x.v)
		}
		for i, x := range vs {
			v := x.v
			v.ViewID = "v" + commasFree(i+1)
			o.Views = append(o.Views, v)
		}
		return o
	}
	// Plans are made on additive estimates: each fact, view and summary
	// level is counted once on its own (as JSON, handles normalised) and a
	// plan costs the sum plus the skeleton. Counting the whole outcome for
	// every candidate would take a second for a result with dozens of parts.
	// The chosen plan is then checked with exact counts, backing off while it
	// does not fit.
	jsonCost := func(v any) int {
		b, _ := json.Marshal(v)
		return f.m.count(f.handleRE.ReplaceAllLiteralString(string(b), handlePlaceholder)) + 1
	}
	for i := range facts {
		facts[i].cost = jsonCost(facts[i].v)
	}
	for i := range views {
		v := views[i].v
		v.ViewID = "v00"
		views[i].cost = jsonCost(v)
	}
	base := f.fitCost(Outcome{Facts: []string{}, Artifacts: arts, Views: []View{}})
	sumCosts := map[int]int{}
	est := func(fs []ranked[string], vs []ranked[View], n int) int {
		c, ok := sumCosts[n]
		if !ok {
			c = jsonCost(summary(n))
			sumCosts[n] = c
		}
		c += base
		for _, x := range fs {
			c += x.cost
		}
		for _, x := range vs {
			c += x.cost
		}
		return c
	}
	fits := func(fs []ranked[string], vs []ranked[View], n int) bool { return est(fs, vs, n) <= f.maxInline }
	// best is the highest level that fits with fs and vs, or -1.
	best := func(fs []ranked[string], vs []ranked[View]) int {
		if !fits(fs, vs, 0) {
			return -1
		}
		lo, hi := 0, maxLevel
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if fits(fs, vs, mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}

	fs, vs := facts, views
	level := best(fs, vs)
	if level < minLevel {
		// Drop secondary views, then secondary facts, then the other views,
		// until minLevel fits; keep that only if it buys a better summary,
		// and give back whatever still fits at the level reached.
		rfs, rvs := slices.Clone(facts), slices.Clone(views)
		var dropped []any
	shrink:
		for !fits(rfs, rvs, minLevel) {
			switch {
			case maxRank(rvs) >= 1:
				rvs, dropped = dropLastInto(rvs, dropped)
			case maxRank(rfs) >= 1:
				rfs, dropped = dropLastInto(rfs, dropped)
			case len(rvs) > 0:
				rvs, dropped = dropLastInto(rvs, dropped)
			case len(rfs) > 1:
				rfs, dropped = dropLastInto(rfs, dropped)
			default:
				break shrink
			}
		}
		if l2 := best(rfs, rvs); l2 > level {
			for i := len(dropped) - 1; i >= 0; i-- {
				switch x := dropped[i].(type) {
				case ranked[string]:
					if try := insertRanked(rfs, x); fits(try, rvs, l2) {
						rfs = try
					}
				case ranked[View]:
					if try := insertRanked(rvs, x); fits(rfs, try, l2) {
						rvs = try
					}
				}
			}
			fs, vs, level = rfs, rvs, l2
		}
	}
	if level >= 0 {
		// Check the plan exactly (fitCost also bounds the real cost), backing
		// off a level, then a view, then a fact at a time.
		out := build(fs, vs, level)
		for max(f.fitCost(out), f.cost(out)) > f.maxInline {
			switch {
			case level > 0:
				level--
			case len(vs) > 0:
				vs, _ = dropLastInto(vs, nil)
			case len(fs) > 1:
				fs, _ = dropLastInto(fs, nil)
			default:
				level = -1
			}
			if level < 0 {
				break
			}
			out = build(fs, vs, level)
		}
		if level >= 0 {
			return out
		}
	}
	// Even the bare summary is too long (or the artifact list alone is): keep
	// one fact, no views, and cut the summary with the counter.
	o := build(facts[:1], nil, 0)
	full := o.Summary
	o.Summary = ""
	room := f.maxInline - f.fitCost(o)
	for room > 0 {
		cut, _, _ := f.m.cut(full, room)
		o.Summary = cut + "…"
		over := max(f.fitCost(o), f.cost(o)) - f.maxInline
		if over <= 0 {
			return o
		}
		room -= over
	}
	o.Summary = ""
	return o
}

// dropLastInto drops the element that goes first and records it.
func dropLastInto[T any](xs []ranked[T], dropped []any) ([]ranked[T], []any) {
	worst := 0
	for i, x := range xs {
		if x.rank > xs[worst].rank || (x.rank == xs[worst].rank && x.order > xs[worst].order) {
			worst = i
		}
	}
	dropped = append(dropped, xs[worst])
	return slices.Delete(slices.Clone(xs), worst, worst+1), dropped
}

// insertRanked puts x back in order.
func insertRanked[T any](xs []ranked[T], x ranked[T]) []ranked[T] {
	i := 0
	for i < len(xs) && xs[i].order < x.order {
		i++
	}
	return slices.Insert(slices.Clone(xs), i, x)
}

// maxRank is the highest rank in xs (-1 if empty).
func maxRank[T any](xs []ranked[T]) int {
	m := -1
	for _, x := range xs {
		m = max(m, x.rank)
	}
	return m
}
