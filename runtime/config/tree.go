package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// Bounds of the YAML tree, on top of MaxFileSize: aliases could otherwise
// expand a small file into a huge value.
const (
	maxNodes = 200_000
	maxDepth = 64
)

// loc is where one value of the document is: the value node and, for a
// mapping member, its key node, plus the field name in the file's terms.
type loc struct {
	line, col   int // value node
	kline, kcol int // key node; 0 for list items and the root
	field       string
}

// position returns the key position of a member, else the value position.
func (l loc) position() (int, int) {
	if l.kline > 0 {
		return l.kline, l.kcol
	}
	return l.line, l.col
}

// tree is a YAML document converted to a JSON-compatible value
// (map[string]any, []any, string, json.Number, bool, nil) with the
// location of every value, keyed by JSON pointer (RFC 6901).
type tree struct {
	file  string
	value any
	locs  map[string]loc
	nodes int
	// active holds the anchors being expanded, to refuse alias cycles.
	active map[*yaml.Node]bool
}

// errAt returns an *Error positioned at the value at ptr (at its key when
// it is a mapping member).
func (t *tree) errAt(ptr, format string, args ...any) *Error {
	l, ok := t.locs[ptr]
	if !ok {
		l = t.locs[""]
	}
	line, col := l.position()
	return &Error{File: t.file, Line: line, Column: col, Field: l.field, Msg: fmt.Sprintf(format, args...)}
}

// yamlLineRE picks the line out of go-yaml's syntax errors.
var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// parseTree decodes data as one YAML document. An empty document (or one
// holding only comments) is an empty mapping.
func parseTree(file string, data []byte) (t *tree, err error) {
	t = &tree{file: file, locs: map[string]loc{}, active: map[*yaml.Node]bool{}}
	defer func() {
		// go-yaml reports some malformed input by panicking; refuse the
		// file rather than the process.
		if r := recover(); r != nil {
			t, err = nil, &Error{File: file, Msg: fmt.Sprintf("not valid YAML: %s", oneLine(fmt.Sprint(r)))}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			t.locs[""] = loc{line: 1, col: 1}
			t.value = map[string]any{}
			return t, nil
		}
		return nil, syntaxError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: file, Line: extra.Line, Column: extra.Column, Msg: "more than one YAML document; a configuration is one document"}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(file, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			t.locs[""] = loc{line: 1, col: 1}
			t.value = map[string]any{}
			return t, nil
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		// "---" or "~" alone: nothing configured.
		t.locs[""] = loc{line: root.Line, col: root.Column}
		t.value = map[string]any{}
		return t, nil
	}
	v, cerr := t.convert(root, "", "", 0, 0, 0)
	if cerr != nil {
		return nil, cerr
	}
	t.value = v
	return t, nil
}

// syntaxError turns a go-yaml error into an *Error with its line.
func syntaxError(file string, err error) *Error {
	msg := oneLine(err.Error())
	e := &Error{File: file, Msg: "not valid YAML: " + msg, Err: err}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		// go-yaml counts lines from 0 in parser errors and from 1 in
		// scanner errors, and leaves the line out when it is 0.
		e.Line = 1
		if m[1] != "" {
			e.Line, _ = strconv.Atoi(m[1])
			if isParserError(m[2]) {
				e.Line++
			}
		}
		e.Msg = "not valid YAML: " + m[2]
	}
	return e
}

// isParserError reports whether a go-yaml message comes from its parser
// (rather than its scanner), by the parser's fixed messages.
func isParserError(msg string) bool {
	for _, p := range []string{
		"did not find expected node content",
		"did not find expected key",
		"did not find expected '-' indicator",
		"did not find expected ',' or",
		"did not find expected <document start>",
		"found undefined tag handle",
		"found duplicate %",
		"found incompatible YAML document",
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// convert converts n, located at ptr and named field, recording locations.
// kline/kcol are the position of the key whose value n is (0 for items).
func (t *tree) convert(n *yaml.Node, ptr, field string, kline, kcol, depth int) (any, *Error) {
	t.nodes++
	if t.nodes > maxNodes {
		return nil, &Error{File: t.file, Line: n.Line, Column: n.Column, Field: field, Msg: fmt.Sprintf("document is too large (more than %d values, aliases expanded)", maxNodes)}
	}
	if depth > maxDepth {
		return nil, &Error{File: t.file, Line: n.Line, Column: n.Column, Field: field, Msg: fmt.Sprintf("nesting is deeper than %d levels", maxDepth)}
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || t.active[n.Alias] {
			return nil, &Error{File: t.file, Line: n.Line, Column: n.Column, Field: field, Msg: "alias refers to an enclosing anchor (a cycle)"}
		}
		t.active[n.Alias] = true
		defer delete(t.active, n.Alias)
		// Report positions at the alias itself; its content lies elsewhere.
		v, err := t.convert(n.Alias, ptr, field, kline, kcol, depth+1)
		if err == nil {
			t.locs[ptr] = loc{line: n.Line, col: n.Column, kline: kline, kcol: kcol, field: field}
		}
		return v, err
	}
	t.locs[ptr] = loc{line: n.Line, col: n.Column, kline: kline, kcol: kcol, field: field}
	fail := func(format string, args ...any) *Error {
		return &Error{File: t.file, Line: n.Line, Column: n.Column, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return nil, fail("nested YAML document")
	case yaml.MappingNode:
		if n.Tag != "" && n.ShortTag() != "!!map" {
			return nil, fail("unsupported YAML tag %s", oneLine(n.Tag))
		}
		m := make(map[string]any, len(n.Content)/2)
		first := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			for kn.Kind == yaml.AliasNode && kn.Alias != nil && !t.active[kn.Alias] {
				kn = kn.Alias
			}
			if kn.Kind != yaml.ScalarNode {
				return nil, &Error{File: t.file, Line: kn.Line, Column: kn.Column, Field: field, Msg: "a mapping key must be a plain scalar"}
			}
			if kn.ShortTag() == "!!merge" {
				return nil, &Error{File: t.file, Line: kn.Line, Column: kn.Column, Field: field, Msg: "YAML merge keys (<<) are not supported; write the keys out"}
			}
			key := kn.Value
			if msg := badText(key); msg != "" {
				return nil, &Error{File: t.file, Line: kn.Line, Column: kn.Column, Field: field, Msg: "key " + msg}
			}
			cf := childField(field, key)
			if line, dup := first[key]; dup {
				return nil, &Error{File: t.file, Line: kn.Line, Column: kn.Column, Field: cf, Msg: fmt.Sprintf("duplicate key (first at line %d)", line)}
			}
			first[key] = kn.Line
			v, err := t.convert(vn, ptr+"/"+jsonpointer.Escape(key), cf, kn.Line, kn.Column, depth+1)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
		return m, nil
	case yaml.SequenceNode:
		if n.Tag != "" && n.ShortTag() != "!!seq" {
			return nil, fail("unsupported YAML tag %s", oneLine(n.Tag))
		}
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := t.convert(c, ptr+"/"+strconv.Itoa(i), field+"["+strconv.Itoa(i)+"]", 0, 0, depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		return scalar(n, fail)
	}
	return nil, fail("unsupported YAML node")
}

// scalar converts a scalar node by its resolved tag.
func scalar(n *yaml.Node, fail func(string, ...any) *Error) (any, *Error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fail("not a boolean: %s", oneLine(err.Error()))
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			var u uint64
			if uerr := n.Decode(&u); uerr == nil {
				return json.Number(strconv.FormatUint(u, 10)), nil
			}
			return nil, fail("integer out of range")
		}
		return json.Number(strconv.FormatInt(i, 10)), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fail("not a number: %s", oneLine(err.Error()))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fail("must be a finite number")
		}
		if f == math.Trunc(f) {
			return json.Number(strconv.FormatFloat(f, 'f', -1, 64)), nil
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case "!!str", "!!timestamp":
		if msg := badText(n.Value); msg != "" {
			return nil, fail("string %s", msg)
		}
		return n.Value, nil
	}
	return nil, fail("unsupported YAML tag %s", oneLine(n.Tag))
}

// badText says why s cannot be a configuration string ("" when it can):
// it must be UTF-8 without control characters other than tab, line feed
// and carriage return (so that it reads the same back from YAML and JSON).
func badText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || (r >= 0x7f && r <= 0x9f) {
			return fmt.Sprintf("contains the control character %U", r)
		}
	}
	return ""
}

// childField names member key of field: "a.b", or a["b c"] when key is not
// a plain identifier.
func childField(field, key string) string {
	if isIdent(key) {
		if field == "" {
			return key
		}
		return field + "." + key
	}
	q := strconv.Quote(key)
	if len(q) > 80 {
		q = q[:76] + `..."`
	}
	return field + "[" + q + "]"
}

// isIdent reports whether s is [A-Za-z_$][A-Za-z0-9_]*.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c == '$' && i == 0:
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
