package argguard

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

// ReasonUnknownArgs is the receipt reason code of a strict_args refusal.
const ReasonUnknownArgs = "UNKNOWN_ARGS"

// maxUnknownListed bounds the unknown names a refusal lists.
const maxUnknownListed = 20

// maxRefs bounds the $ref hops followed while collecting the names a
// schema declares; a deeper chain is treated as an open schema.
const maxRefs = 32

// Strict refuses argument names the input schema does not declare
// (strict_args, spec 001 test 6), before dispatch; nil when every name is
// declared. It judges each object the schema describes (the arguments,
// and below them objects under declared properties and array items):
//
//   - declared are the names under properties, in this schema and in
//     every allOf, anyOf and oneOf branch and local $ref ("#/...") it
//     reaches, and names matching a patternProperties pattern;
//   - an object whose schema (or a branch of it) sets additionalProperties
//     or unevaluatedProperties to anything but false, or has a $ref
//     quiver cannot resolve, is open: the upstream asked for names it did
//     not list, and they pass;
//   - additionalProperties absent is not permission (JSON Schema's
//     default is what strict_args exists to close);
//   - the arguments refuse every name when the schema declares none (the
//     tool takes no arguments); below them, a value whose schema lists
//     no properties ({} or true) is anything.
func Strict(schema, args map[string]any) *Refusal {
	var unknown []string
	var walk func(s map[string]any, v any, ptr string, depth int)
	walk = func(s map[string]any, v any, ptr string, depth int) {
		if depth > MaxDepth || s == nil {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			d := collect(schema, s)
			if depth > 0 && len(d.props) == 0 && len(d.patterns) == 0 {
				d.open = true // a value the schema gives no shape: anything
			}
			for k, c := range x {
				sub, ok := d.props[k]
				if !ok && !d.open && !d.matches(k) {
					unknown = append(unknown, ptr+"/"+escape(k))
					continue
				}
				if ok {
					walk(sub, c, ptr+"/"+escape(k), depth+1)
				}
			}
		case []any:
			d := collect(schema, s)
			if d.items != nil {
				for i, c := range x {
					walk(d.items, c, fmt.Sprintf("%s/%d", ptr, i), depth+1)
				}
			}
		}
	}
	walk(schema, args, "", 0)
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	listed := unknown[:min(len(unknown), maxUnknownListed)]
	return &Refusal{Code: codes.ArgsInvalid, Path: "args" + unknown[0], Reasons: []string{ReasonUnknownArgs}, Unknown: listed,
		Message: fmt.Sprintf("%d argument name(s) the tool's input schema does not declare (strict_args), first %q", len(unknown), unknown[0])}
}

// declared is what a schema and its branches declare of one object.
type declared struct {
	props    map[string]map[string]any
	patterns []*regexp.Regexp
	open     bool
	items    map[string]any
}

func (d *declared) matches(k string) bool {
	for _, re := range d.patterns {
		if re.MatchString(k) {
			return true
		}
	}
	return false
}

// collect gathers what s declares, following composition and local $refs
// within root.
func collect(root, s map[string]any) *declared {
	d := &declared{props: map[string]map[string]any{}}
	hops := 0
	var visit func(s map[string]any)
	visit = func(s map[string]any) {
		if s == nil || d.open {
			return
		}
		if ref, ok := s["$ref"].(string); ok {
			hops++
			target := resolve(root, ref)
			if target == nil || hops > maxRefs {
				d.open = true
				return
			}
			visit(target)
		}
		if p, ok := s["properties"].(map[string]any); ok {
			for k, v := range p {
				sub, _ := v.(map[string]any)
				if sub == nil {
					sub = map[string]any{} // true: anything
				}
				if _, seen := d.props[k]; !seen {
					d.props[k] = sub
				}
			}
		}
		if pp, ok := s["patternProperties"].(map[string]any); ok {
			for pat := range pp {
				re, err := regexp.Compile(pat)
				if err != nil {
					d.open = true
					return
				}
				d.patterns = append(d.patterns, re)
			}
		}
		for _, k := range []string{"additionalProperties", "unevaluatedProperties"} {
			if v, ok := s[k]; ok && v != false {
				d.open = true
				return
			}
		}
		if it, ok := s["items"].(map[string]any); ok && d.items == nil {
			d.items = it
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			if list, ok := s[k].([]any); ok {
				for _, b := range list {
					if bs, ok := b.(map[string]any); ok {
						visit(bs)
					}
				}
			}
		}
	}
	visit(s)
	return d
}

// resolve returns the subschema a local JSON pointer $ref names in root
// ("#", "#/$defs/x", "#/definitions/x", ...); nil for another reference.
func resolve(root map[string]any, ref string) map[string]any {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	cur := any(root)
	if p == "" {
		return root
	}
	if !strings.HasPrefix(p, "/") {
		return nil
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}

// escape escapes a JSON pointer token.
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
