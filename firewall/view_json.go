package firewall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// valueCap bounds the bytes of one JSON value a view holds in memory.
const valueCap = 1 << 20

// requireJSON rejects JSON selectors on other media types.
func (v *viewer) requireJSON(typ string) error {
	if !v.class.json {
		return viewFail("%s does not fit media type %s: it needs application/json", typ, v.meta.MediaType)
	}
	return nil
}

// jsonErr maps an error met while scanning a JSON artifact.
func (v *viewer) jsonErr(typ string, err error) error {
	switch {
	case errors.Is(err, ErrViewFailed):
		return err
	case errors.Is(err, errJSON):
		return viewFail("%s: the artifact is not valid JSON (%v)", typ, err)
	}
	return v.readErr(err)
}

// where names a pointer for messages.
func where(p string) string {
	if p == "" {
		return `"" (the document)`
	}
	return p
}

// seekPointer moves s to the start of the value at toks, or fails with an
// ErrViewFailed error naming the first token that leads nowhere.
func seekPointer(typ string, s *jscan, toks []string) error {
	for i, tok := range toks {
		here := jsonpointer.Format(toks[:i])
		c, err := s.peek()
		if err != nil {
			return s.eof(err)
		}
		switch kindOf(c) {
		case kObject:
			found := false
			err := s.members(6*len(tok)+2, func(key string, ok bool, _ int) (bool, error) {
				if ok && key == tok {
					found = true
					return true, nil
				}
				return false, s.skipValue(i + 1)
			})
			if err != nil {
				return err
			}
			if !found {
				return viewFail("%s: no key %s in the object at %s", typ, quoteShort(tok), where(here))
			}
		case kArray:
			idx, ok := jsonpointer.ArrayIndex(tok)
			if !ok {
				if tok == "-" {
					return viewFail(`%s: "-" names the element after the last of the array at %s, which does not exist; use an index`, typ, where(here))
				}
				return viewFail("%s: %s is not an array index (the value at %s is an array)", typ, quoteShort(tok), where(here))
			}
			found, n := false, 0
			err := s.members(0, func(_ string, _ bool, j int) (bool, error) {
				if j == idx {
					found = true
					return true, nil
				}
				n++
				return false, s.skipValue(i + 1)
			})
			if err != nil {
				return err
			}
			if !found {
				return viewFail("%s: index %s is out of range at %s (array of %s)", typ, tok, where(here), plural(n, "item", "items"))
			}
		default:
			return viewFail("%s: the value at %s is a %s; it has no member %s", typ, where(here), kindName(kindOf(c)), quoteShort(tok))
		}
	}
	if _, err := s.peek(); err != nil {
		return s.eof(err)
	}
	return nil
}

// compactJSON compacts raw JSON (returning it as is if it does not parse).
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// drillHint suggests a narrower pointer for a large value.
func drillHint(p string, n jnode) string {
	switch {
	case n.kind == kArray && n.count > 0:
		return "; narrow it with json_pointer " + p + "/0"
	case n.kind == kObject && len(n.keys) > 0:
		return "; narrow it with json_pointer " + jsonpointer.Child(p, n.keys[0]) + " or json_keys"
	}
	return ""
}

func (v *viewer) jsonPointer(sel Selector) (ViewResult, error) {
	if err := v.requireJSON(sel.Type); err != nil {
		return ViewResult{}, err
	}
	toks, err := parsePointer(sel.Pointer)
	if err != nil {
		return ViewResult{}, fmt.Errorf("%w: %w", ErrViewFailed, err)
	}
	rc, err := v.open()
	if err != nil {
		return ViewResult{}, err
	}
	defer rc.Close()
	s := newJScan(rc)
	s.check = v.ctx.Err
	if err := seekPointer(sel.Type, s, toks); err != nil {
		return ViewResult{}, v.jsonErr(sel.Type, err)
	}
	start := s.off
	s.startCapture(valueCap)
	node, err := s.describe(1)
	raw, over := s.stopCapture()
	if err != nil {
		return ViewResult{}, v.jsonErr(sel.Type, err)
	}
	size := s.off - start
	what := "value at " + where(sel.Pointer) + ": " + nodePhrase(node, false)
	if node.kind == kObject || node.kind == kArray {
		what += ", " + plural(size, "byte", "bytes")
	}
	if !over {
		c := compactJSON(raw)
		if text, _, cut := v.f.m.cut(c, v.budget); !cut {
			return ViewResult{Text: text, What: what}, nil
		}
	}
	text, _, _ := v.f.m.cut(string(raw), v.budget)
	res := ViewResult{Text: text, Truncated: true}
	res.What = what + "; first " + plural(len(text), "byte", "bytes") + " shown as stored, cut at the " + commas(v.budget) + "-token budget" + drillHint(sel.Pointer, node)
	res.Next = Selector{Type: SelBytes, Offset: start + int64(len(text)), Length: DefaultBytesLength}.raw()
	return res, nil
}

// keyValue is one member found by json_keys.
type keyValue struct {
	raw   string
	over  bool
	start int64
	size  int64
}

func (v *viewer) jsonKeys(sel Selector) (ViewResult, error) {
	if err := v.requireJSON(sel.Type); err != nil {
		return ViewResult{}, err
	}
	toks, err := parsePointer(sel.Pointer)
	if err != nil {
		return ViewResult{}, fmt.Errorf("%w: %w", ErrViewFailed, err)
	}
	rc, err := v.open()
	if err != nil {
		return ViewResult{}, err
	}
	defer rc.Close()
	s := newJScan(rc)
	s.check = v.ctx.Err
	if err := seekPointer(sel.Type, s, toks); err != nil {
		return ViewResult{}, v.jsonErr(sel.Type, err)
	}
	if c, _ := s.peek(); kindOf(c) != kObject {
		return ViewResult{}, viewFail("json_keys: the value at %s is %s, not an object", where(sel.Pointer), kindName(kindOf(c)))
	}
	want := make(map[string]int, len(sel.Keys))
	for i, k := range sel.Keys {
		want[k] = i
	}
	found := make([]*keyValue, len(sel.Keys))
	remaining := len(sel.Keys)
	var others []string
	nOthers := 0
	depth := len(toks) + 1
	err = s.members(MaxKeyBytes*6+2, func(key string, ok bool, _ int) (bool, error) {
		if i, w := want[key]; ok && w && found[i] == nil {
			kv := &keyValue{start: s.off}
			s.startCapture(valueCap)
			err := s.skipValue(depth)
			raw, over := s.stopCapture()
			kv.raw, kv.over, kv.size = string(raw), over, s.off-kv.start
			found[i] = kv
			remaining--
			return remaining == 0, err
		}
		nOthers++
		if len(others) < 20 {
			if !ok {
				key = "(long key)"
			}
			others = append(others, key)
		}
		return false, s.skipValue(depth)
	})
	if err != nil {
		return ViewResult{}, v.jsonErr(sel.Type, err)
	}
	if remaining == len(sel.Keys) {
		has := "it has no keys"
		if len(others) > 0 {
			has = "its keys include: " + joinCapped(others, nOthers, 160)
		}
		return ViewResult{}, viewFail("json_keys: none of the keys exist in the object at %s (%s)", where(sel.Pointer), has)
	}

	var b strings.Builder
	b.WriteByte('{')
	used := 2
	var shown, missing, rest []string
	res := ViewResult{}
	cutValue := false
	for i, k := range sel.Keys {
		kv := found[i]
		switch {
		case kv == nil:
			missing = append(missing, k)
			continue
		case cutValue || len(rest) > 0:
			rest = append(rest, k)
			continue
		}
		var kb bytes.Buffer
		writeJSONString(&kb, k)
		name := kb.String() + ":"
		sep := ""
		if len(shown) > 0 {
			sep = ","
		}
		if !kv.over {
			pair := sep + name + compactJSON([]byte(kv.raw))
			if t, n, cut := v.f.m.cut(pair, v.budget-used); !cut {
				b.WriteString(t)
				used += n
				shown = append(shown, k)
				continue
			}
		}
		if len(shown) > 0 {
			rest = append(rest, k)
			continue
		}
		// The first value alone is too large: show its start as stored.
		head := sep + name
		room := v.budget - used - v.f.m.count(head)
		t, _, _ := v.f.m.cut(kv.raw, max(room, 0))
		b.WriteString(head + t)
		shown = append(shown, k)
		cutValue = true
		res.Truncated = true
		res.Next = Selector{Type: SelBytes, Offset: kv.start + int64(len(t)), Length: DefaultBytesLength}.raw()
		res.What = "value of " + quoteShort(k) + " (" + plural(kv.size, "byte", "bytes") + ") cut after " + plural(len(t), "byte", "bytes") + "; bytes continues it"
	}
	if !cutValue {
		b.WriteByte('}')
	}
	res.Text = b.String()
	desc := plural(len(shown), "key", "keys") + " of the object at " + where(sel.Pointer)
	if res.What != "" {
		res.What = desc + "; " + res.What
	} else {
		res.What = desc
	}
	if len(missing) > 0 {
		res.What += "; missing: " + joinCapped(missing, len(missing), 120)
	}
	if len(rest) > 0 {
		res.Truncated = true
		res.What += "; not shown (token budget): " + joinCapped(rest, len(rest), 120)
		if res.Next == nil {
			res.Next = Selector{Type: SelJSONKeys, Keys: rest, Pointer: sel.Pointer}.raw()
		}
	}
	return res, nil
}
