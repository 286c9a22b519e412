package argguard

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

func TestStrict(t *testing.T) {
	plain := `{"type":"object","properties":{"text":{"type":"string"},"opts":{"type":"object","properties":{"n":{}}},"list":{"type":"array","items":{"type":"object","properties":{"id":{}}}}}}`
	for _, tc := range []struct {
		name, schema, args string
		unknown            []string // nil when allowed
	}{
		{"declared", plain, `{"text":"a"}`, nil},
		{"none", plain, `{}`, nil},
		{"unknown top", plain, `{"text":"a","extra":1}`, []string{"/extra"}},
		{"several sorted", plain, `{"z":1,"b":2,"text":"a"}`, []string{"/b", "/z"}},
		{"nested unknown", plain, `{"opts":{"n":1,"m":2}}`, []string{"/opts/m"}},
		{"array items", plain, `{"list":[{"id":1},{"id":2,"x":3}]}`, []string{"/list/1/x"}},
		{"escaped", plain, `{"a/b~":1}`, []string{"/a~1b~0"}},
		{"empty schema refuses every name", `{"type":"object"}`, `{"a":1}`, []string{"/a"}},
		{"empty schema empty args", `{"type":"object"}`, `{}`, nil},
		{"additionalProperties true", `{"properties":{"a":{}},"additionalProperties":true}`, `{"b":1}`, nil},
		{"additionalProperties schema", `{"properties":{"a":{}},"additionalProperties":{"type":"string"}}`, `{"b":"x"}`, nil},
		{"additionalProperties false", `{"properties":{"a":{}},"additionalProperties":false}`, `{"b":1}`, []string{"/b"}},
		{"unevaluatedProperties true", `{"properties":{"a":{}},"unevaluatedProperties":true}`, `{"b":1}`, nil},
		{"patternProperties match", `{"properties":{"a":{}},"patternProperties":{"^x-":{}}}`, `{"x-trace":1}`, nil},
		{"patternProperties miss", `{"properties":{"a":{}},"patternProperties":{"^x-":{}}}`, `{"y":1}`, []string{"/y"}},
		{"bad pattern is open", `{"patternProperties":{"(":{}}}`, `{"y":1}`, nil},
		{"allOf", `{"allOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}]}`, `{"a":1,"b":2,"c":3}`, []string{"/c"}},
		{"anyOf", `{"anyOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}]}`, `{"b":2}`, nil},
		{"oneOf open branch", `{"oneOf":[{"properties":{"a":{}}},{"additionalProperties":{}}]}`, `{"z":2}`, nil},
		{"local ref", `{"$ref":"#/$defs/in","$defs":{"in":{"properties":{"a":{}}}}}`, `{"a":1,"b":2}`, []string{"/b"}},
		{"ref in property", `{"properties":{"o":{"$ref":"#/definitions/o"}},"definitions":{"o":{"properties":{"k":{}}}}}`, `{"o":{"k":1,"j":2}}`, []string{"/o/j"}},
		{"remote ref is open", `{"$ref":"https://example.com/s.json"}`, `{"z":1}`, nil},
		{"ref cycle", `{"$ref":"#"}`, `{"z":1}`, nil},
		{"boolean property schema", `{"properties":{"a":true}}`, `{"a":{"any":1}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Strict(mustArgs(t, tc.schema), mustArgs(t, tc.args))
			switch {
			case tc.unknown == nil && r != nil:
				t.Fatalf("refused: %+v", r)
			case tc.unknown != nil && r == nil:
				t.Fatal("allowed")
			case r != nil:
				if r.Code != codes.ArgsInvalid || !slices.Equal(r.Unknown, tc.unknown) || r.Path != "args"+tc.unknown[0] ||
					!slices.Equal(r.Reasons, []string{ReasonUnknownArgs}) {
					t.Fatalf("refusal %+v, want unknown %v", r, tc.unknown)
				}
			}
		})
	}
}

// FuzzStrict runs the strict_args check on any schema (an upstream's,
// outside input) and arguments: it returns, and a refusal lists at most
// maxUnknownListed names.
func FuzzStrict(f *testing.F) {
	f.Add(`{"properties":{"a":{}},"allOf":[{"$ref":"#/$defs/x"}],"$defs":{"x":{"patternProperties":{"^b":{}}}}}`, `{"a":1,"bb":2,"c":[{}]}`)
	f.Add(`{"$ref":"#"}`, `{"x":{"y":1}}`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		var s, a map[string]any
		if json.Unmarshal([]byte(schema), &s) != nil || json.Unmarshal([]byte(args), &a) != nil {
			return
		}
		if r := Strict(s, a); r != nil && (len(r.Unknown) == 0 || len(r.Unknown) > maxUnknownListed) {
			t.Fatalf("refusal %+v", r)
		}
	})
}
