package router

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Provider variants of SelectionSchema (spec 003 §2.6).
const (
	// SchemaJSON is the bare JSON Schema.
	SchemaJSON = "json_schema"
	// SchemaOpenAI is the OpenAI response_format envelope around it.
	SchemaOpenAI = "openai"
	// SchemaAnthropic is an Anthropic tool definition with it as
	// input_schema.
	SchemaAnthropic = "anthropic"
)

// Names used inside the selection schemas.
const (
	// SelectionProperty is the one property of a selection object.
	SelectionProperty = "selection"
	// SelectionSchemaName names the schema in the OpenAI envelope and the
	// tool in the Anthropic definition.
	SelectionSchemaName = "tool_selection"
)

// SelectionSchema renders the offered candidate ids as a JSON Schema whose
// required "selection" property is an enum of those ids (spec 003 §2.6,
// "constrain before"), so that a provider's constrained-output API keeps a
// model from inventing or misspelling an id. variant is SchemaJSON (the
// bare schema), SchemaOpenAI ({"type": "json_schema", "json_schema": {"name",
// "strict": true, "schema"}}) or SchemaAnthropic ({"name", "description",
// "input_schema"}). Duplicate ids are listed once, in first-seen order.
// No candidates, an empty id or an unknown variant is an error wrapping
// ErrArgsInvalid. Every call returns freshly allocated maps.
func SelectionSchema(ids []string, variant string) (map[string]any, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no candidates to select from", ErrArgsInvalid)
	}
	enum := make([]any, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if id == "" {
			return nil, fmt.Errorf("%w: candidate %d is empty", ErrArgsInvalid, i)
		}
		if !seen[id] {
			seen[id] = true
			enum = append(enum, id)
		}
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			SelectionProperty: map[string]any{
				"type":        "string",
				"description": "The id of the one chosen candidate, exactly as offered.",
				"enum":        enum,
			},
		},
		"required":             []any{SelectionProperty},
		"additionalProperties": false,
	}
	switch variant {
	case SchemaJSON:
		return schema, nil
	case SchemaOpenAI:
		return map[string]any{
			"type": "json_schema",
			"json_schema": map[string]any{
				"name":   SelectionSchemaName,
				"strict": true,
				"schema": schema,
			},
		}, nil
	case SchemaAnthropic:
		return map[string]any{
			"name":         SelectionSchemaName,
			"description":  "Select exactly one of the offered candidates by its id.",
			"input_schema": schema,
		}, nil
	}
	return nil, fmt.Errorf("%w: unknown selection schema variant %s (want %s, %s or %s)",
		ErrArgsInvalid, strconv.Quote(cutSeg(variant, 32)), SchemaJSON, SchemaOpenAI, SchemaAnthropic)
}

// SelectionStatus is the outcome of ValidateSelection.
type SelectionStatus string

// Selection outcomes.
const (
	// SelectionAccepted: the value is one of the candidates, byte for byte.
	SelectionAccepted SelectionStatus = "accepted"
	// SelectionRepaired: the value resolved to exactly one candidate after
	// trimming whitespace, folding case or completing a prefix.
	SelectionRepaired SelectionStatus = "repaired"
	// SelectionRejected: the value names no candidate, or more than one.
	SelectionRejected SelectionStatus = "rejected"
)

// Selection is the typed result of ValidateSelection.
type Selection struct {
	Status SelectionStatus `json:"status"`
	// ID is the resolved candidate id; "" when rejected.
	ID string `json:"id,omitempty"`
	// Reason says how the value was repaired or why it was rejected; ""
	// when accepted.
	Reason string `json:"reason,omitempty"`
}

// ValidateSelection checks an id a model returned against the candidates it
// was offered (spec 003 §2.6, "validate after"). A value equal to a
// candidate is accepted. Otherwise repair is tried, in this order, against
// the value with surrounding whitespace removed: an exact match, then a
// unique case-insensitive match, then a unique case-insensitive prefix of
// one candidate. A value that folds to, or prefixes, two or more distinct
// candidates is rejected, never guessed; so are the empty value and any
// value when there are no candidates. Reasons are one line and quote at
// most 80 bytes of the value.
func ValidateSelection(selected string, candidates []string) Selection {
	reject := func(why string) Selection { return Selection{Status: SelectionRejected, Reason: why} }
	if len(candidates) == 0 {
		return reject("no candidates were offered")
	}
	for _, c := range candidates {
		if c == selected && c != "" {
			return Selection{Status: SelectionAccepted, ID: c}
		}
	}
	v := strings.TrimSpace(selected)
	if v == "" {
		return reject("empty selection")
	}
	q := quotePath(v)
	for _, c := range candidates {
		if c == v {
			return Selection{Status: SelectionRepaired, ID: c, Reason: "surrounding whitespace removed"}
		}
	}
	if m := distinctMatches(candidates, func(c string) bool { return strings.EqualFold(c, v) }); len(m) == 1 {
		return Selection{Status: SelectionRepaired, ID: m[0], Reason: "case-insensitive match of " + q}
	} else if len(m) > 1 {
		return reject(fmt.Sprintf("%s matches %d candidates ignoring case", q, len(m)))
	}
	lv := strings.ToLower(v)
	if m := distinctMatches(candidates, func(c string) bool { return strings.HasPrefix(strings.ToLower(c), lv) }); len(m) == 1 {
		return Selection{Status: SelectionRepaired, ID: m[0], Reason: "unique prefix " + q}
	} else if len(m) > 1 {
		return reject(fmt.Sprintf("%s is a prefix of %d candidates", q, len(m)))
	}
	return reject(q + " is not one of the candidates")
}

// distinctMatches returns the distinct candidates that match, in order.
func distinctMatches(candidates []string, match func(string) bool) []string {
	var out []string
	for _, c := range candidates {
		if c != "" && match(c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}
