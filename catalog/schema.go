package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/quiver-mcp/quiver/internal/textclean"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// SchemaLimits bound the complexity of an upstream schema (spec 003 §4.4).
// Upstream schemas are untrusted input: a schema over a limit is not
// compiled at all.
type SchemaLimits struct {
	MaxBytes      int // serialized size
	MaxDepth      int // nesting depth of JSON objects and arrays
	MaxProperties int // total number of property definitions, at any depth
}

// DefaultSchemaLimits are generous: the largest schema of the 3,641 real
// tools in the shared catalog is far below each of them.
var DefaultSchemaLimits = SchemaLimits{MaxBytes: 256 << 10, MaxDepth: 32, MaxProperties: 2048}

// ErrArgsInvalid is matched by argument validation failures.
var ErrArgsInvalid = errors.New("arguments do not match the tool's input schema")

// ErrSchemaInvalid is matched when a tool's own schema failed ingest-time
// checks, so its arguments cannot be validated (SCHEMA_INVALID).
var ErrSchemaInvalid = errors.New("the tool's input schema is invalid")

// ArgFinding is one validator finding about caller arguments.
type ArgFinding struct {
	Path    string `json:"path"` // JSON pointer into the arguments, "" for the root
	Message string `json:"message"`
}

// ArgsError lists every finding of one failed validation.
type ArgsError struct {
	Findings []ArgFinding
}

func (e *ArgsError) Error() string {
	parts := make([]string, 0, len(e.Findings))
	for _, f := range e.Findings {
		p := f.Path
		if p == "" {
			p = "/"
		}
		parts = append(parts, p+": "+f.Message)
	}
	return "invalid arguments: " + strings.Join(parts, "; ")
}

// Is makes an ArgsError match ErrArgsInvalid.
func (e *ArgsError) Is(target error) bool { return target == ErrArgsInvalid }

// refusingLoader refuses every external $ref: an upstream schema must never
// make the gateway read local files or reach the network.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q refused", url)
}

// schemaCheck is the outcome of checking one schema document.
type schemaCheck struct {
	doc      map[string]any     // decoded, nil when not a JSON object
	compiled *jsonschema.Schema // nil when any check failed
	code     string             // finding code, "" when fine
	msg      string
}

// checkSchema bounds, decodes, meta-validates and compiles one schema.
func checkSchema(raw json.RawMessage, lim SchemaLimits) schemaCheck {
	if len(raw) > lim.MaxBytes {
		return schemaCheck{code: CodeSchemaTooLarge, msg: fmt.Sprintf("schema is %d bytes, limit %d", len(raw), lim.MaxBytes)}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return schemaCheck{code: CodeSchemaInvalid, msg: "schema is not valid JSON: " + oneLine(err.Error())}
	}
	doc, isObj := v.(map[string]any)
	depth, props := measure(v, 1)
	switch {
	case depth > lim.MaxDepth:
		return schemaCheck{code: CodeSchemaTooDeep, msg: fmt.Sprintf("schema nests %d levels, limit %d", depth, lim.MaxDepth)}
	case props > lim.MaxProperties:
		return schemaCheck{code: CodeSchemaTooManyProps, msg: fmt.Sprintf("schema defines %d properties, limit %d", props, lim.MaxProperties)}
	case !isObj:
		return schemaCheck{code: CodeSchemaInvalid, msg: "schema is not a JSON object"}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	const loc = "quiver:///schema.json"
	if err := c.AddResource(loc, v); err != nil {
		return schemaCheck{doc: doc, code: CodeSchemaInvalid, msg: oneLine(err.Error())}
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return schemaCheck{doc: doc, code: CodeSchemaInvalid, msg: schemaMessage(err)}
	}
	return schemaCheck{doc: doc, compiled: sch}
}

// measure returns the nesting depth of v and the number of property
// definitions in it (entries of every "properties" object).
func measure(v any, depth int) (maxDepth, props int) {
	maxDepth = depth
	switch x := v.(type) {
	case map[string]any:
		if p, ok := x["properties"].(map[string]any); ok {
			props += len(p)
		}
		for _, c := range x {
			d, n := measure(c, depth+1)
			maxDepth = max(maxDepth, d)
			props += n
		}
	case []any:
		for _, c := range x {
			d, n := measure(c, depth+1)
			maxDepth = max(maxDepth, d)
			props += n
		}
	default:
		maxDepth = depth - 1
	}
	return maxDepth, props
}

// validate checks args against a compiled schema and converts the
// validator's output into findings.
func validate(sch *jsonschema.Schema, args any) error {
	err := sch.Validate(args)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgsError{Findings: []ArgFinding{{Message: oneLine(err.Error())}}}
	}
	var out []ArgFinding
	seen := map[ArgFinding]bool{}
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			f := ArgFinding{Path: u.InstanceLocation, Message: oneLine(u.Error.String())}
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*ve.BasicOutput())
	if len(out) == 0 {
		out = []ArgFinding{{Message: oneLine(ve.Error())}}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return &ArgsError{Findings: out}
}

// oneLine collapses s to one line without control characters, capped.
func oneLine(s string) string { return textclean.OneLine(s, 300) }

// schemaMessage says why a schema failed meta-validation: the first
// failing keyword with its whole location, then how many more failed. The
// validator's own text leads with every enclosing allOf, which a one-line
// cap cuts before the useful part.
func schemaMessage(err error) string {
	var se *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &se) || !errors.As(se.Err, &ve) {
		return oneLine(err.Error())
	}
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(leaves) == 0 {
		return oneLine(err.Error())
	}
	first := leaves[0]
	var ptr strings.Builder
	for _, seg := range first.InstanceLocation {
		ptr.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(seg))
	}
	where := ptr.String()
	if where == "" {
		where = "/"
	}
	what := first.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	more := ""
	if n := len(leaves) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	// The location is kept whole; the description gives way.
	head := "not a valid JSON Schema at " + where + ": "
	return head + oneLine(textclean.OneLine(what, max(40, 300-len(head)-len(more)))+more)
}
