package controls

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// The repair rules of spec 003 §4.4 (issue #488), by their names as
// provenance arg_repairs records them.
const (
	RuleParseStringifiedObject = "parse_stringified_object"
	RuleStrToInteger           = "str_to_integer"
	RuleStrToNumber            = "str_to_number"
	RuleStrToBoolean           = "str_to_boolean"
	RuleStrToNull              = "str_to_null"
)

// ArgRepair is one applied repair: the rule and the JSON pointer of the
// repaired value ("" for the arguments as a whole).
type ArgRepair struct {
	Rule    string
	Pointer string
}

// String renders the repair as provenance records it: "rule /pointer" (the
// whole arguments are "/").
func (r ArgRepair) String() string {
	p := r.Pointer
	if p == "" {
		p = "/"
	}
	return r.Rule + " " + p
}

// ParseStringifiedArgs applies parse_stringified_object: when raw is a
// JSON string whose content, after a leading BOM and surrounding white
// space are stripped, is one JSON object, it returns that object's JSON.
func ParseStringifiedArgs(raw json.RawMessage) (json.RawMessage, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '"' {
		return nil, false
	}
	var s string
	if err := json.Unmarshal(t, &s); err != nil {
		return nil, false
	}
	s = strings.TrimPrefix(s, "\uFEFF")
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return json.RawMessage(s), true
}

var (
	integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	numberLiteral  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
)

// RepairArgs applies the field rules (str_to_integer, str_to_number,
// str_to_boolean, str_to_null) to args in place, guided by schema, the
// tool's decoded input schema: a string value is coerced only where the
// schema's type for it demands the target type and does not admit a
// string. Properties are followed through nested objects ("properties")
// and arrays ("items"); nothing is renamed, dropped or guessed. It returns
// the repairs in a deterministic order (sorted keys).
func RepairArgs(args map[string]any, schema map[string]any) []ArgRepair {
	var out []ArgRepair
	repairObject(args, schema, "", &out)
	return out
}

func repairObject(obj map[string]any, schema map[string]any, ptr string, out *[]ArgRepair) {
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 {
		return
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub, ok := props[k].(map[string]any)
		if !ok {
			continue
		}
		p := ptr + "/" + jsonpointer.Escape(k)
		if v, rule, ok := repairValue(obj[k], sub, p, out); ok {
			obj[k] = v
			*out = append(*out, ArgRepair{Rule: rule, Pointer: p})
		}
	}
}

// repairValue returns the repaired value of v for schema, or recurses into
// objects and arrays.
func repairValue(v any, schema map[string]any, ptr string, out *[]ArgRepair) (any, string, bool) {
	switch x := v.(type) {
	case map[string]any:
		repairObject(x, schema, ptr, out)
		return nil, "", false
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				p := ptr + "/" + strconv.Itoa(i)
				if nv, rule, ok := repairValue(e, items, p, out); ok {
					x[i] = nv
					*out = append(*out, ArgRepair{Rule: rule, Pointer: p})
				}
			}
		}
		return nil, "", false
	case string:
		return coerce(x, schemaTypes(schema))
	}
	return nil, "", false
}

// schemaTypes returns the set of types a schema's "type" names.
func schemaTypes(schema map[string]any) map[string]bool {
	set := map[string]bool{}
	switch t := schema["type"].(type) {
	case string:
		set[t] = true
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				set[s] = true
			}
		}
	}
	return set
}

// coerce applies the first rule the types demand; a type set that admits
// strings is never coerced.
func coerce(s string, types map[string]bool) (any, string, bool) {
	if types["string"] || len(types) == 0 {
		return nil, "", false
	}
	if types["integer"] && integerLiteral.MatchString(s) {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, RuleStrToInteger, true
		}
		return json.Number(s), RuleStrToInteger, true
	}
	if types["number"] && numberLiteral.MatchString(s) {
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, RuleStrToNumber, true
		}
	}
	if types["boolean"] && (s == "true" || s == "false") {
		return s == "true", RuleStrToBoolean, true
	}
	if types["null"] && s == "null" {
		return nil, RuleStrToNull, true
	}
	return nil, "", false
}
