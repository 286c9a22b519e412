// Package cli serves governed command-line tools from manifests (spec 002):
// the `cli` upstream kind. A tool is a reviewed manifest of a few lines: a
// fixed command, an argv template filled only from validated input, its
// class and permissions, and how its output is parsed and bounded. The
// runtime lists a cli upstream's tools like any upstream's, so browse,
// hydrate, execute, guards, firewall, output policy and receipts apply to
// them unchanged.
//
// # Security model
//
// The command is fixed in the manifest and must be in the upstream's
// allowed_commands. Arguments are an argv array, never a shell string: a
// template item is a literal or the value of one validated input field,
// and a value is always exactly one argument (never split on spaces). The
// command runs through [sandbox.Launcher] with a minimal environment and,
// when the upstream has a sandbox block, under bubblewrap.
//
// Option injection: a value placed as its own argument that begins with
// '-' would be read as an option by most programs (git's --upload-pack,
// sort's --output). Such a value is refused ([ErrArgRefused]) unless the
// template puts a literal "--" (end of options) before it, or joins it to
// a prefix ({arg: since, prefix: "--since="}), where it cannot be an option
// of its own. The manifest author decides which; the default refuses.
// Values holding a NUL byte are refused too (no argv can carry one).
package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/internal/boundedread"
	"github.com/quiver-mcp/quiver/runtime/outpolicy"
	"github.com/quiver-mcp/quiver/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	yaml "go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Classes of a tool.
const (
	ClassRead        = "read"
	ClassWrite       = "write"
	ClassDestructive = "destructive"
)

// PermDestructive is the permission calling a destructive tool needs on
// top of its own (spec 002 §1.6).
const PermDestructive = "allow_destructive"

// Parsers of a tool's output.
const (
	ParserText  = "text"
	ParserLines = "lines"
	ParserJSON  = "json"
	ParserJSONL = "jsonl"
	ParserCSV   = "csv"
)

// Defaults and bounds.
const (
	DefaultTimeout  = 30 * time.Second
	MaxTimeout      = 10 * time.Minute
	DefaultMaxBytes = 1 << 20
	// MaxManifestBytes bounds one manifest file, refused before parsing.
	MaxManifestBytes = 256 << 10
	// MaxTools bounds the tools of one upstream.
	MaxTools = 1024
)

// ErrManifest is matched (errors.Is) by every manifest error.
var ErrManifest = errors.New("invalid cli tool manifest")

// ManifestError is a manifest problem with its place in the file.
type ManifestError struct {
	File   string
	Line   int // 0 when unknown
	Column int
	Field  string // JSON pointer of the value ("" for the document)
	Msg    string
}

// Error implements error: "file:line:col: field: message".
func (e *ManifestError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is makes errors.Is(err, ErrManifest) true.
func (e *ManifestError) Is(target error) bool { return target == ErrManifest }

// Elevation is a manifest's elevation rule.
type Elevation struct {
	If          map[string]any `json:"if"`
	Permissions []string       `json:"permissions"`
}

// ArgItem is one item of an argv template.
type ArgItem struct {
	// Literal is a fixed argument (Arg and Flag empty).
	Literal string
	// Arg names the input field whose value goes here.
	Arg string
	// Prefix is joined to the value of Arg in one argument.
	Prefix string
	// Flag is a literal included when the boolean input field If is true.
	Flag, If string
}

// UnmarshalJSON reads a string or an object item.
func (a *ArgItem) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*a = ArgItem{Literal: s}
		return nil
	}
	var o struct {
		Arg    string `json:"arg"`
		Prefix string `json:"prefix"`
		Flag   string `json:"flag"`
		If     string `json:"if"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*a = ArgItem{Arg: o.Arg, Prefix: o.Prefix, Flag: o.Flag, If: o.If}
	return nil
}

// Output configures parsing and bounding stdout.
type Output struct {
	Parser    string `json:"parser"`
	StripANSI *bool  `json:"strip_ansi"`
	MaxBytes  int64  `json:"max_bytes"`
}

// Manifest is one validated tool manifest.
type Manifest struct {
	// Source is the file it came from.
	Source       string                      `json:"-"`
	Name         string                      `json:"name"`
	Title        string                      `json:"title"`
	Description  string                      `json:"description"`
	Class        string                      `json:"class"`
	Permissions  []string                    `json:"permissions"`
	Elevated     *Elevation                  `json:"elevated"`
	Input        json.RawMessage             `json:"input"`
	Command      string                      `json:"command"`
	Args         []ArgItem                   `json:"args"`
	Cwd          string                      `json:"cwd"`
	Env          map[string]string           `json:"env"`
	TimeoutText  string                      `json:"timeout"`
	OKExitCodes  []int                       `json:"ok_exit_codes"`
	Output       Output                      `json:"output"`
	OutputSchema json.RawMessage             `json:"output_schema"`
	OutputPolicy map[string]outpolicy.Action `json:"output_policy"`

	// Timeout is TimeoutText parsed (DefaultTimeout when absent).
	Timeout time.Duration `json:"-"`
	// Policy is OutputPolicy compiled (nil when absent).
	Policy *outpolicy.Policy `json:"-"`
}

// Required returns the permissions a call with args needs: the tool's,
// allow_destructive for a destructive tool, and the elevated ones when
// the elevation rule holds for args. Sorted, without duplicates.
func (m *Manifest) Required(args map[string]any) []string {
	set := map[string]bool{}
	for _, p := range m.Permissions {
		set[p] = true
	}
	if m.Class == ClassDestructive {
		set[PermDestructive] = true
	}
	if m.Elevates(args) {
		for _, p := range m.Elevated.Permissions {
			set[p] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Elevates reports whether the elevation rule holds for args: every
// argument it names equals its value (JSON equality).
func (m *Manifest) Elevates(args map[string]any) bool {
	if m.Elevated == nil || len(m.Elevated.If) == 0 {
		return false
	}
	for k, want := range m.Elevated.If {
		got, ok := args[k]
		if !ok || !jsonEqual(got, want) {
			return false
		}
	}
	return true
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// schemaURL is the $id of schemas/cli_tool.schema.json.
const schemaURL = "https://quiver-mcp.dev/schemas/cli_tool.schema.json"

// loadSchema compiles the manifest schema once per process; it is never
// modified after.
var loadSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.CLITool))
	if err != nil {
		return nil, fmt.Errorf("cli tool schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("cli tool schema: %w", err)
	}
	return c.Compile(schemaURL)
})

// Parse validates one manifest (YAML, or JSON, which is YAML) read from
// source; baseDir resolves a relative cwd. allowed is the upstream's
// allowed_commands. Errors are *ManifestError values with the line of the
// offending value.
func Parse(source string, data []byte, baseDir string, allowed []string) (*Manifest, error) {
	fail := func(line, col int, field, format string, args ...any) error {
		return &ManifestError{File: source, Line: line, Column: col, Field: field, Msg: oneLine(fmt.Sprintf(format, args...))}
	}
	if len(data) > MaxManifestBytes {
		return nil, fail(0, 0, "", "the file is %d bytes, more than %d", len(data), MaxManifestBytes)
	}
	doc, locs, err := parseYAML(data)
	if err != nil {
		return nil, fail(0, 0, "", "%v", err)
	}
	at := func(ptr string) (int, int) {
		for {
			if l, ok := locs[ptr]; ok {
				return l[0], l[1]
			}
			i := strings.LastIndexByte(ptr, '/')
			if i < 0 {
				return 1, 1
			}
			ptr = ptr[:i]
		}
	}
	failAt := func(ptr, format string, args ...any) error {
		l, c := at(ptr)
		return fail(l, c, ptr, format, args...)
	}
	sch, err := loadSchema()
	if err != nil {
		return nil, err
	}
	if err := sch.Validate(doc); err != nil {
		ptr, msg := leafError(err)
		return nil, failAt(ptr, "%s", msg)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fail(0, 0, "", "%v", err)
	}
	m := &Manifest{Source: source}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fail(0, 0, "", "%v", err)
	}
	if !commandAllowed(m.Command, allowed) {
		return nil, failAt("/command", "command %q is not in the upstream's allowed_commands %q", m.Command, allowed)
	}
	m.Timeout = DefaultTimeout
	if m.TimeoutText != "" {
		d, err := time.ParseDuration(m.TimeoutText)
		if err != nil || d <= 0 || d > MaxTimeout {
			return nil, failAt("/timeout", "must be a duration from 1ms to %s", MaxTimeout)
		}
		m.Timeout = d
	}
	if m.Output.Parser == "" {
		m.Output.Parser = ParserText
	}
	if m.Output.MaxBytes == 0 {
		m.Output.MaxBytes = DefaultMaxBytes
	}
	if m.Output.StripANSI == nil {
		t := true
		m.Output.StripANSI = &t
	}
	if len(m.OKExitCodes) == 0 {
		m.OKExitCodes = []int{0}
	}
	if m.Cwd != "" && !filepath.IsAbs(m.Cwd) {
		m.Cwd = filepath.Join(baseDir, m.Cwd)
	}
	if m.Cwd != "" {
		m.Cwd = filepath.Clean(m.Cwd)
	}
	// The template may name only fields the input schema declares; a
	// flag's field must be a boolean.
	var in struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(m.Input, &in)
	for i, a := range m.Args {
		ptr := "/args/" + strconv.Itoa(i)
		switch {
		case a.Arg != "":
			if _, ok := in.Properties[a.Arg]; !ok {
				return nil, failAt(ptr+"/arg", "names %q, which the input schema does not declare", a.Arg)
			}
		case a.If != "":
			p, ok := in.Properties[a.If]
			if !ok {
				return nil, failAt(ptr+"/if", "names %q, which the input schema does not declare", a.If)
			}
			if p.Type != "boolean" {
				return nil, failAt(ptr+"/if", "%q must have type boolean in the input schema", a.If)
			}
		}
	}
	if m.Elevated != nil {
		for k := range m.Elevated.If {
			if _, ok := in.Properties[k]; !ok {
				return nil, failAt("/elevated/if", "names %q, which the input schema does not declare", k)
			}
		}
	}
	if err := compiles(m.Input); err != nil {
		return nil, failAt("/input", "is not a valid JSON Schema: %v", err)
	}
	if len(m.OutputSchema) > 0 {
		if err := compiles(m.OutputSchema); err != nil {
			return nil, failAt("/output_schema", "is not a valid JSON Schema: %v", err)
		}
	}
	if m.OutputPolicy != nil {
		if m.Policy, err = outpolicy.Compile(m.OutputPolicy); err != nil {
			return nil, failAt("/output_policy", "%v", err)
		}
	}
	return m, nil
}

// commandAllowed reports whether cmd is listed, exactly.
func commandAllowed(cmd string, allowed []string) bool {
	for _, a := range allowed {
		if a == cmd {
			return true
		}
	}
	return false
}

// compiles reports whether raw is a JSON Schema the validator accepts.
func compiles(raw json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	const url = "mem:///schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return err
	}
	_, err = c.Compile(url)
	return err
}

// refusingLoader refuses external references: a manifest is
// self-contained.
type refusingLoader struct{}

// Load implements jsonschema.URLLoader.
func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q refused", url)
}

// leafError returns the location and message of the first, deepest
// validation failure.
func leafError(err error) (string, string) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "", err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := append([]string(nil), ve.InstanceLocation...)
	if ap, ok := ve.ErrorKind.(*kind.AdditionalProperties); ok && len(ap.Properties) > 0 {
		// Point at the unknown key itself, not at its object.
		loc = append(loc, ap.Properties[0])
	}
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String(), ve.ErrorKind.LocalizedString(message.NewPrinter(language.English))
}

// maxNodes bounds a manifest's YAML tree (aliases could expand it).
const maxNodes = 50_000

// parseYAML decodes one YAML document into a JSON-compatible value and
// the line and column of every value, by JSON pointer.
func parseYAML(data []byte) (v any, locs map[string][2]int, err error) {
	defer func() {
		// go-yaml reports some malformed input by panicking.
		if r := recover(); r != nil {
			v, locs, err = nil, nil, fmt.Errorf("not valid YAML: %v", r)
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("the file is empty")
		}
		return nil, nil, fmt.Errorf("not valid YAML: %v", err)
	}
	var more yaml.Node
	if dec.Decode(&more) == nil {
		return nil, nil, errors.New("more than one YAML document")
	}
	locs = map[string][2]int{}
	nodes := 0
	var conv func(n *yaml.Node, ptr string, depth int) (any, error)
	conv = func(n *yaml.Node, ptr string, depth int) (any, error) {
		nodes++
		if nodes > maxNodes || depth > 64 {
			return nil, errors.New("the document is too large or too deeply nested")
		}
		locs[ptr] = [2]int{n.Line, n.Column}
		switch n.Kind {
		case yaml.DocumentNode:
			if len(n.Content) == 0 {
				return nil, errors.New("the file is empty")
			}
			return conv(n.Content[0], ptr, depth)
		case yaml.AliasNode:
			return conv(n.Alias, ptr, depth+1)
		case yaml.MappingNode:
			m := make(map[string]any, len(n.Content)/2)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("line %d: a mapping key must be a string", k.Line)
				}
				if _, dup := m[k.Value]; dup {
					return nil, fmt.Errorf("line %d: key %q is given twice", k.Line, k.Value)
				}
				cp := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k.Value, "~", "~0"), "/", "~1")
				val, err := conv(n.Content[i+1], cp, depth+1)
				if err != nil {
					return nil, err
				}
				locs[cp] = [2]int{k.Line, k.Column}
				m[k.Value] = val
			}
			return m, nil
		case yaml.SequenceNode:
			l := make([]any, 0, len(n.Content))
			for i, c := range n.Content {
				val, err := conv(c, ptr+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, val)
			}
			return l, nil
		}
		var x any
		if err := n.Decode(&x); err != nil {
			return nil, fmt.Errorf("line %d: %v", n.Line, err)
		}
		switch t := x.(type) {
		case int:
			return json.Number(strconv.Itoa(t)), nil
		case int64:
			return json.Number(strconv.FormatInt(t, 10)), nil
		case uint64:
			return json.Number(strconv.FormatUint(t, 10)), nil
		case float64:
			return json.Number(strconv.FormatFloat(t, 'g', -1, 64)), nil
		case string, bool, nil:
			return t, nil
		case time.Time:
			return n.Value, nil
		}
		return nil, fmt.Errorf("line %d: a value of type %T has no JSON form", n.Line, x)
	}
	v, err = conv(&doc, "", 0)
	return v, locs, err
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// Load reads every manifest the globs match (absolute, or relative to
// baseDir), in name order. A glob matching nothing, a file too large, an
// invalid manifest, a command outside allowed and two tools of one name
// are errors.
func Load(globs []string, baseDir string, allowed []string) ([]*Manifest, error) {
	abs := make([]string, len(globs))
	for i, g := range globs {
		if !filepath.IsAbs(g) {
			g = filepath.Join(baseDir, g)
		}
		abs[i] = g
	}
	files, err := boundedread.Glob(abs, MaxTools)
	if err != nil {
		return nil, fmt.Errorf("%w: manifests: %w", ErrManifest, err)
	}
	names := map[string]string{}
	var out []*Manifest
	for _, f := range files {
		data, err := boundedread.File(f, MaxManifestBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrManifest, err)
		}
		m, err := Parse(f, data, filepath.Dir(f), allowed)
		if err != nil {
			return nil, err
		}
		if first, dup := names[m.Name]; dup {
			return nil, &ManifestError{File: f, Line: 1, Column: 1, Field: "/name", Msg: fmt.Sprintf("tool %q is also defined in %s", m.Name, first)}
		}
		names[m.Name] = f
		out = append(out, m)
	}
	return out, nil
}
