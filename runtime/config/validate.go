package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/quiver-mcp/quiver/internal/editdist"
	"github.com/quiver-mcp/quiver/internal/jsonpointer"
	"github.com/quiver-mcp/quiver/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaURL is the $id of schemas/config.schema.json.
const schemaURL = "https://quiver-mcp.dev/schemas/config.schema.json"

// compiledSchema is the embedded schema, compiled, with its decoded document
// (to list the keys allowed where an unknown one is found).
type compiledSchema struct {
	schema *jsonschema.Schema
	doc    any
}

// loadSchema compiles the embedded schema once per process; the result is
// never modified after.
var loadSchema = sync.OnceValues(func() (*compiledSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.Config))
	if err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	return &compiledSchema{schema: sch, doc: doc}, nil
})

// refusingLoader refuses every external reference: the config schema is
// self-contained.
type refusingLoader struct{}

// Load implements jsonschema.URLLoader.
func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q refused", url)
}

// validateSchema checks t against the schema and returns the problem that
// comes first in the file, or nil.
func validateSchema(t *tree) error {
	cs, err := loadSchema()
	if err != nil {
		return err
	}
	verr := cs.schema.Validate(t.value)
	if verr == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return &Error{File: t.file, Msg: oneLine(verr.Error()), Err: verr}
	}
	var found []*Error
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if _, ok := e.ErrorKind.(*kind.PropertyNames); ok || len(e.Causes) == 0 {
			found = append(found, describe(t, cs, e)...)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(found) == 0 {
		return &Error{File: t.file, Line: 1, Column: 1, Msg: oneLine(ve.Error())}
	}
	return earliest(found)
}

// earliest returns the error positioned first in the file (the first found
// among equals).
func earliest(errs []*Error) *Error {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i], errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return errs[0]
}

// pointer joins instance location tokens into a JSON pointer.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteByte('/')
		b.WriteString(jsonpointer.Escape(tok))
	}
	return b.String()
}

// patternMessage explains a pattern of the schema, by the location of the
// subschema that holds it.
func patternMessage(frag string) (string, bool) {
	switch frag {
	case "/$defs/duration":
		return `must be a duration such as "100ms", "60s", "1h30m" or "24h"`, true
	case "/$defs/size":
		return `must be a size such as 1048576, "512MiB", "1GiB" or "100KB"`, true
	case "/$defs/envName":
		return "must be an environment variable name (letters, digits and '_', not starting with a digit)", true
	case "/$defs/headerName":
		return "must be an HTTP header name", true
	case "/$defs/rateScope":
		return "must be tool_browse, tool_execute, tool_view, tool_hydrate or tool:<tool_id glob>", true
	case "/$defs/url":
		return "must be an http:// or https:// URL", true
	case "/$defs/name":
		return "must not contain control characters", true
	case "/$defs/path":
		return "must not contain NUL", true
	case "/$defs/upstream/properties/tool_prefix":
		return "must be at most 64 of the characters A-Z a-z 0-9 _ . -", true
	case "/properties/listen/properties/path":
		return "must start with '/'", true
	}
	return "", false
}

// fragment returns the JSON pointer part of a schema location.
func fragment(schemaLoc string) string {
	_, f, _ := strings.Cut(schemaLoc, "#")
	return f
}

// describe turns one leaf validation error into positioned errors.
func describe(t *tree, cs *compiledSchema, e *jsonschema.ValidationError) []*Error {
	ptr := pointer(e.InstanceLocation)
	at := func(format string, args ...any) []*Error {
		return []*Error{t.errAt(ptr, format, args...)}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		allowed := allowedKeys(cs.doc, fragment(e.SchemaURL))
		var out []*Error
		for _, p := range k.Properties {
			out = append(out, t.errAt(ptr+"/"+jsonpointer.Escape(p), "%s", unknownKeyMessage(p, allowed)))
		}
		return out
	case *kind.PropertyNames:
		msg := "is not an allowed key"
		if m, ok := patternMessage(deepestDef(e)); ok {
			msg = "key " + m
		}
		// jsonschema/v6 (v6.0.3) reports propertyNames errors with an
		// instance location that aliases a reused buffer, so find the
		// objects holding the key by the schema location instead.
		var out []*Error
		for _, owner := range keyOwners(t.value, "", ownerName(fragment(e.SchemaURL)), k.Property) {
			out = append(out, t.errAt(owner+"/"+jsonpointer.Escape(k.Property), "%s", msg))
		}
		if len(out) == 0 {
			out = []*Error{t.errAt("", "key %q %s", k.Property, msg)}
		}
		return out
	case *kind.Required:
		if len(k.Missing) == 1 {
			return at("missing required key %q", k.Missing[0])
		}
		return at("missing required keys %s", strings.Join(quoteAll(k.Missing), ", "))
	case *kind.Type:
		got := k.Got
		if n, ok := valueAt(t.value, e.InstanceLocation).(json.Number); ok && got == "number" && !strings.ContainsAny(string(n), ".eE") {
			got = "integer"
		}
		return at("must be %s, got %s", joinOr(article(k.Want)), article([]string{got})[0])
	case *kind.Enum:
		return at("must be one of %s", enumList(k.Want))
	case *kind.Const:
		return at("must be %v", k.Want)
	case *kind.Pattern:
		if m, ok := patternMessage(fragment(e.SchemaURL)); ok {
			return at("%s", m)
		}
		return at("must match the pattern %s", k.Want)
	case *kind.Minimum:
		return at("must be at least %s", ratString(k.Want))
	case *kind.Maximum:
		return at("must be at most %s", ratString(k.Want))
	case *kind.MinLength:
		if k.Want == 1 {
			return at("must not be empty")
		}
		return at("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return at("must be at most %d characters long", k.Want)
	case *kind.MinItems:
		if k.Want == 1 {
			return at("must not be empty")
		}
		return at("must have at least %d items", k.Want)
	case *kind.MaxItems:
		return at("must have at most %d items", k.Want)
	case *kind.MinProperties:
		if strings.HasSuffix(fragment(e.SchemaURL), "/$defs/rateLimit") {
			return at("must set max_calls_per_minute or max_calls_per_session")
		}
		return at("must have at least %d keys", k.Want)
	case *kind.UniqueItems:
		return []*Error{t.errAt(ptr+"/"+strconv.Itoa(k.Duplicates[1]), "repeats item %d", k.Duplicates[0])}
	}
	return at("%s", oneLine(e.ErrorKind.LocalizedString(message.NewPrinter(language.English))))
}

// ownerName returns the property whose value a propertyNames keyword at
// frag constrains: "rate_limits" for "/properties/rate_limits/propertyNames".
func ownerName(frag string) string {
	parts := strings.Split(frag, "/")
	if len(parts) >= 3 && parts[len(parts)-1] == "propertyNames" {
		return parts[len(parts)-2]
	}
	return ""
}

// keyOwners returns the pointers of the mappings in v that are the value
// of a member named name and hold key.
func keyOwners(v any, ptr, name, key string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			cp := ptr + "/" + jsonpointer.Escape(k)
			if m, ok := c.(map[string]any); ok && k == name {
				if _, has := m[key]; has {
					out = append(out, cp)
				}
			}
			out = append(out, keyOwners(c, cp, name, key)...)
		}
	case []any:
		for i, c := range x {
			out = append(out, keyOwners(c, ptr+"/"+strconv.Itoa(i), name, key)...)
		}
	}
	return out
}

// valueAt returns the value at the instance location tokens (nil when
// there is none).
func valueAt(v any, tokens []string) any {
	for _, tok := range tokens {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// deepestDef returns the schema fragment of the deepest cause of e that
// lies under $defs ("" when none).
func deepestDef(e *jsonschema.ValidationError) string {
	best := ""
	if f := fragment(e.SchemaURL); strings.HasPrefix(f, "/$defs/") {
		best = f
	}
	for _, c := range e.Causes {
		if d := deepestDef(c); d != "" {
			best = d
		}
	}
	return best
}

// allowedKeys lists the properties of the schema object at frag.
func allowedKeys(doc any, frag string) []string {
	cur := doc
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[tok]
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		if k != "$schema" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// unknownKeyMessage explains an unknown key: inline secrets are pointed to
// *_env, near misses get a suggestion.
func unknownKeyMessage(key string, allowed []string) string {
	if n := normKey(key); n == "headers" || n == "header" {
		return "unknown key; header values are not written in the file: name an environment variable per header with credentials.headers_env"
	}
	if looksSecretKey(key) {
		return "unknown key; inline secrets are not allowed in the file: name an environment variable with credentials.bearer_env or credentials.headers_env (or a token file with credentials.bearer_file)"
	}
	if s := suggest(key, allowed); s != "" {
		return fmt.Sprintf("unknown key (did you mean %s?)", s)
	}
	if len(allowed) > 0 && len(allowed) <= 30 {
		return "unknown key; allowed: " + strings.Join(allowed, ", ")
	}
	return "unknown key"
}

// suggest returns the allowed key closest to key when it is close enough.
func suggest(key string, allowed []string) string {
	best, bestD := "", 3
	lk := strings.ToLower(key)
	for _, a := range allowed {
		if d := editDistance(lk, a); d < bestD {
			best, bestD = a, d
		}
	}
	if best != "" && bestD <= max(1, len(key)/4) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b (bytes), capped for
// long inputs.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 64
	}
	return editdist.Levenshtein(a, b)
}

// article names JSON types for messages: "a string", "a mapping", ...
func article(types []string) []string {
	out := make([]string, len(types))
	for i, ty := range types {
		switch ty {
		case "object":
			out[i] = "a mapping"
		case "array":
			out[i] = "a list"
		case "integer":
			out[i] = "an integer"
		case "null":
			out[i] = "null"
		default:
			out[i] = "a " + ty
		}
	}
	return out
}

// joinOr joins words with ", " and a final " or ".
func joinOr(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// enumList formats enum values without quotes.
func enumList(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}

// quoteAll quotes every string.
func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// ratString formats a schema bound.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}
