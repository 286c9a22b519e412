package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// Bounds of a policy document beyond MaxFileSize: aliases could otherwise
// expand a small file into a huge value.
const (
	maxNodes = 200_000
	maxDepth = 32
)

// doc is a YAML (or JSON) document converted to a JSON-compatible value
// (map[string]any, []any, string, json.Number, bool, nil), with the line
// of every value keyed by JSON pointer.
type doc struct {
	value  any
	lines  map[string]int
	nodes  int
	active map[*yaml.Node]bool
}

// decodeYAML converts one YAML document; it never panics.
func decodeYAML(data []byte) (d *doc, err error) {
	d = &doc{lines: map[string]int{}, active: map[*yaml.Node]bool{}}
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, &ParseError{Msg: fmt.Sprintf("not valid YAML: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{Msg: "the file is empty"}
		}
		return nil, &ParseError{Msg: "not valid YAML: " + oneLine(err.Error()), Err: err}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}
		return nil, &ParseError{Line: line, Msg: "more than one YAML document; a policy is one document"}
	} else if !errors.Is(err, io.EOF) {
		return nil, &ParseError{Msg: "not valid YAML: " + oneLine(err.Error()), Err: err}
	}
	n := &root
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, &ParseError{Msg: "the file is empty"}
		}
		n = n.Content[0]
	}
	v, perr := d.convert(n, "", 0)
	if perr != nil {
		return nil, perr
	}
	d.value = v
	return d, nil
}

func (d *doc) convert(n *yaml.Node, ptr string, depth int) (any, *ParseError) {
	d.nodes++
	if d.nodes > maxNodes {
		return nil, &ParseError{Line: n.Line, Msg: fmt.Sprintf("document is too large (more than %d values, aliases expanded)", maxNodes)}
	}
	if depth > maxDepth {
		return nil, &ParseError{Line: n.Line, Msg: fmt.Sprintf("nesting is deeper than %d levels", maxDepth)}
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || d.active[n.Alias] {
			return nil, &ParseError{Line: n.Line, Msg: "alias refers to an enclosing anchor"}
		}
		d.active[n.Alias] = true
		defer delete(d.active, n.Alias)
		v, err := d.convert(n.Alias, ptr, depth+1)
		d.lines[ptr] = n.Line
		return v, err
	}
	d.lines[ptr] = n.Line
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return nil, &ParseError{Line: k.Line, Msg: "a mapping key must be a plain scalar (merge keys are not supported)"}
			}
			if _, dup := m[k.Value]; dup {
				return nil, &ParseError{Line: k.Line, Msg: fmt.Sprintf("duplicate key %q", oneLine(k.Value))}
			}
			cv, err := d.convert(v, ptr+"/"+jsonpointer.Escape(k.Value), depth+1)
			if err != nil {
				return nil, err
			}
			d.lines[ptr+"/"+jsonpointer.Escape(k.Value)] = k.Line
			m[k.Value] = cv
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			cv, err := d.convert(c, ptr+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, cv)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, &ParseError{Line: n.Line, Msg: "bad boolean"}
			}
			return b, nil
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, &ParseError{Line: n.Line, Msg: "bad number"}
			}
			// Keep integers exact; the schema checks ranges.
			if n.ShortTag() == "!!int" {
				var i int64
				if err := n.Decode(&i); err == nil {
					return json.Number(strconv.FormatInt(i, 10)), nil
				}
			}
			b, err := json.Marshal(f)
			if err != nil {
				return nil, &ParseError{Line: n.Line, Msg: "number out of range"}
			}
			return json.Number(b), nil
		case "!!str", "!!timestamp", "!!binary":
			return n.Value, nil
		}
		return nil, &ParseError{Line: n.Line, Msg: fmt.Sprintf("unsupported YAML tag %s", oneLine(n.Tag))}
	}
	return nil, &ParseError{Line: n.Line, Msg: "unsupported YAML node"}
}

// line returns the line of the value at ptr, or of its nearest ancestor.
func (d *doc) line(ptr string) int {
	for {
		if l, ok := d.lines[ptr]; ok {
			return l
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return 0
		}
		ptr = ptr[:i]
	}
}

// oneLine collapses s to one printable line, capped at 200 bytes.
func oneLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		b.WriteRune(r)
		if b.Len() >= 200 {
			break
		}
	}
	return strings.TrimSpace(b.String())
}
