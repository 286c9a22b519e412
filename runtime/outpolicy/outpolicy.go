// Package outpolicy filters a tool's output through an allowlist of field
// paths before any caller, artifact store or cache sees it (spec 002 §1.8).
//
// A [Policy] is a set of rules, each a path glob and an [Action]. A path
// names a field by its keys joined with dots (customer.email); array
// elements share their array's path, so items.email names the email of
// every element of items. A glob is matched segment by segment: a segment
// of the glob is a [policy.Glob] over one key ('*' any run of characters,
// '?' one character, '\' escapes), and the segment "**" matches any number
// of keys, none included. So "*" matches every top-level field (and, as
// rules apply to whole subtrees, everything), "customer.*" every field of
// customer, "*.email" the email of every top-level object.
//
// A field takes the action of the most specific rule that matches its own
// path, else the action its parent took; a field no rule reaches is
// removed (default deny). Most specific means more literal segments, then
// more segments, then the stricter action (redact over mask over allow).
// allow keeps a field, mask replaces a string with its first character,
// "***" and its last character (a string of two characters or less, and
// any other scalar, becomes "***"), and redact removes it. mask on an
// object or array removes it like redact, unless a more specific rule
// below keeps part of it. Every removed or masked field is reported by its
// path (without array indices), so that a receipt can say what was
// withheld without carrying it.
package outpolicy

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/runtime/policy"
)

// Action is what a rule does to the fields it matches.
type Action string

// The actions.
const (
	Allow  Action = "allow"
	Mask   Action = "mask"
	Redact Action = "redact"
)

// Bounds of a policy and of what Apply reports.
const (
	// MaxRules bounds the rules of one policy.
	MaxRules = 256
	// MaxPathLen bounds one path glob, in bytes.
	MaxPathLen = 512
	// MaxReported bounds the paths Apply reports; the rest are counted.
	MaxReported = 128
	// maxDepth bounds the nesting Apply descends into; deeper values are
	// removed.
	maxDepth = 128
)

// Masked is what a masked value shows when too little of it may be shown.
const Masked = "***"

// ErrPolicy is matched (errors.Is) by every error of Compile.
var ErrPolicy = errors.New("invalid output policy")

// rule is one compiled rule.
type rule struct {
	pattern  string
	segs     []segment
	action   Action
	literals int // segments without wildcards
	length   int // segments other than **
}

// segment is one dot-separated part of a path glob.
type segment struct {
	any  bool // "**"
	glob policy.Glob
}

// Policy is a compiled output policy. The zero Policy, and a nil *Policy,
// deny every field. It is immutable and safe for concurrent use.
type Policy struct {
	rules []rule
}

// Compile compiles rules, a map from path glob to action.
func Compile(rules map[string]Action) (*Policy, error) {
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("%w: %d rules, at most %d", ErrPolicy, len(rules), MaxRules)
	}
	p := &Policy{}
	keys := make([]string, 0, len(rules))
	for k := range rules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r, err := compileRule(k, rules[k])
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

func compileRule(pattern string, a Action) (rule, error) {
	switch a {
	case Allow, Mask, Redact:
	default:
		return rule{}, fmt.Errorf("%w: path %q: action %q is not allow, mask or redact", ErrPolicy, pattern, a)
	}
	if pattern == "" || len(pattern) > MaxPathLen {
		return rule{}, fmt.Errorf("%w: a path must have 1 to %d bytes", ErrPolicy, MaxPathLen)
	}
	r := rule{pattern: pattern, action: a}
	for _, s := range splitPath(pattern) {
		if s == "" {
			return rule{}, fmt.Errorf("%w: path %q has an empty segment", ErrPolicy, pattern)
		}
		if s == "**" {
			r.segs = append(r.segs, segment{any: true})
			continue
		}
		g, err := policy.CompileGlob(s)
		if err != nil {
			return rule{}, fmt.Errorf("%w: path %q: %w", ErrPolicy, pattern, err)
		}
		r.segs = append(r.segs, segment{glob: g})
		r.length++
		if !strings.ContainsAny(s, `*?\`) {
			r.literals++
		}
	}
	return r, nil
}

// splitPath splits a glob on the dots that are not escaped.
func splitPath(p string) []string {
	var out []string
	var cur strings.Builder
	esc := false
	for _, r := range p {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\':
			cur.WriteRune(r)
			esc = true
		case r == '.':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(out, cur.String())
}

// Match reports whether the path glob pattern matches the path keys. It is
// the matcher Apply uses, exported for tests and tools; an invalid pattern
// matches nothing.
func Match(pattern string, keys []string) bool {
	r, err := compileRule(pattern, Allow)
	if err != nil {
		return false
	}
	return r.match(keys)
}

// match reports whether r matches keys exactly. Matching "**" tries every
// split; with a bounded number of segments this is polynomial, and the
// memo keeps it so.
func (r *rule) match(keys []string) bool {
	memo := make(map[[2]int]bool)
	var m func(i, j int) bool
	m = func(i, j int) bool {
		if i == len(r.segs) {
			return j == len(keys)
		}
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		var ok bool
		if r.segs[i].any {
			for n := j; n <= len(keys) && !ok; n++ {
				ok = m(i+1, n)
			}
		} else {
			ok = j < len(keys) && r.segs[i].glob.Match(keys[j]) && m(i+1, j+1)
		}
		memo[k] = ok
		return ok
	}
	return m(0, 0)
}

// stricter ranks actions: redact over mask over allow.
func stricter(a Action) int {
	switch a {
	case Redact:
		return 2
	case Mask:
		return 1
	}
	return 0
}

// decide returns the action of the most specific rule matching keys.
func (p *Policy) decide(keys []string) (Action, bool) {
	var best *rule
	for i := range p.rules {
		r := &p.rules[i]
		if !r.match(keys) {
			continue
		}
		if best == nil || r.literals > best.literals ||
			r.literals == best.literals && (r.length > best.length ||
				r.length == best.length && stricter(r.action) > stricter(best.action)) {
			best = r
		}
	}
	if best == nil {
		return "", false
	}
	return best.action, true
}

// Report lists what Apply withheld.
type Report struct {
	// Redacted are the paths removed (a removed object's fields are not
	// listed again), sorted, at most MaxReported.
	Redacted []string
	// Masked are the paths whose values were masked, sorted, at most
	// MaxReported.
	Masked []string
	// More counts the paths left out of the two lists.
	More int
}

// Paths returns the redacted and masked paths, one list, sorted.
func (r Report) Paths() []string {
	out := append(append([]string{}, r.Redacted...), r.Masked...)
	sort.Strings(out)
	return out
}

// Empty reports whether nothing was withheld.
func (r Report) Empty() bool { return len(r.Redacted) == 0 && len(r.Masked) == 0 && r.More == 0 }

// reporter collects paths without duplicates.
type reporter struct {
	redacted, masked map[string]bool
}

func (rp *reporter) add(set *map[string]bool, keys []string) {
	if *set == nil {
		*set = map[string]bool{}
	}
	p := strings.Join(keys, ".")
	if p == "" {
		p = "$"
	}
	(*set)[p] = true
}

func (rp *reporter) report() Report {
	var out Report
	list := func(set map[string]bool) []string {
		l := make([]string, 0, len(set))
		for k := range set {
			l = append(l, k)
		}
		sort.Strings(l)
		return l
	}
	red, mask := list(rp.redacted), list(rp.masked)
	if n := len(red) + len(mask); n > MaxReported {
		out.More = n - MaxReported
		if len(red) > MaxReported {
			red = red[:MaxReported]
		}
		mask = mask[:min(len(mask), MaxReported-len(red))]
	}
	out.Redacted, out.Masked = red, mask
	return out
}

// Apply returns a filtered copy of v, a decoded JSON value
// (map[string]any, []any, string, float64, json.Number, bool, nil), and
// what it withheld. v is not modified. A nil *Policy removes everything.
func (p *Policy) Apply(v any) (any, Report) {
	if p == nil {
		p = &Policy{}
	}
	rp := &reporter{}
	out, keep := p.walk(v, nil, "", true, rp, 0)
	if !keep {
		return nil, rp.report()
	}
	return out, rp.report()
}

// walk filters v at path keys; inherited is the parent's action ("" for
// none). lookup is false for an array element, which has its array's path
// and so its action. It reports whether anything of v is kept.
func (p *Policy) walk(v any, keys []string, inherited Action, lookup bool, rp *reporter, depth int) (any, bool) {
	act := inherited
	if lookup {
		if a, ok := p.decide(keys); ok {
			act = a
		}
	}
	if depth > maxDepth {
		rp.add(&rp.redacted, keys)
		return nil, false
	}
	// mask on a container redacts it (spec 002 §1.8), but a more specific
	// rule below may keep parts of it.
	inner := act
	if inner == Mask {
		inner = Redact
	}
	var out any
	var n, kept int
	sub := &reporter{}
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ck := append(append(make([]string, 0, len(keys)+1), keys...), k)
			if cv, ok := p.walk(e, ck, inner, true, sub, depth+1); ok {
				m[k] = cv
			}
		}
		out, n, kept = m, len(x), len(m)
	case []any:
		l := make([]any, 0, len(x))
		for _, e := range x {
			if cv, ok := p.walk(e, keys, inner, false, sub, depth+1); ok {
				l = append(l, cv)
			}
		}
		out, n, kept = l, len(x), len(l)
	default:
		switch act {
		case Allow:
			return v, true
		case Mask:
			rp.add(&rp.masked, keys)
			return maskValue(v), true
		}
		rp.add(&rp.redacted, keys)
		return nil, false
	}
	if kept == 0 && (n > 0 || act != Allow) {
		// Nothing of it is kept: report it once, not its fields.
		rp.add(&rp.redacted, keys)
		return nil, false
	}
	rp.merge(sub)
	return out, true
}

// merge adds what sub collected.
func (rp *reporter) merge(sub *reporter) {
	into := func(dst *map[string]bool, src map[string]bool) {
		for k := range src {
			if *dst == nil {
				*dst = map[string]bool{}
			}
			(*dst)[k] = true
		}
	}
	into(&rp.redacted, sub.redacted)
	into(&rp.masked, sub.masked)
}

// maskValue masks a scalar: a string keeps its first and last character
// around "***" when it has more than two; anything else is "***".
func maskValue(v any) any {
	s, ok := v.(string)
	if !ok || utf8.RuneCountInString(s) <= 2 {
		return Masked
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return string(first) + Masked + string(last)
}

// AllowsEverything reports whether the policy keeps every field of any
// value unchanged: it has a rule "**" (or "*") allowing, and no rule masks
// or redacts. Text that is not JSON passes only such a policy.
func (p *Policy) AllowsEverything() bool {
	if p == nil {
		return false
	}
	all := false
	for _, r := range p.rules {
		if r.action != Allow {
			return false
		}
		if r.pattern == "**" || r.pattern == "*" {
			all = true
		}
	}
	return all
}
