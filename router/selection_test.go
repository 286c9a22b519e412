package router

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestSelectionSchema(t *testing.T) {
	ids := []string{"github:create_issue#34afee88", "github:list_repos#da62b2ed", "github:create_issue#34afee88"}
	bare := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"selection": map[string]any{
				"type":        "string",
				"description": "The id of the one chosen candidate, exactly as offered.",
				"enum":        []any{"github:create_issue#34afee88", "github:list_repos#da62b2ed"},
			},
		},
		"required":             []any{"selection"},
		"additionalProperties": false,
	}
	for _, tc := range []struct {
		variant string
		want    map[string]any
	}{
		{SchemaJSON, bare},
		{SchemaOpenAI, map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "tool_selection", "strict": true, "schema": bare}}},
		{SchemaAnthropic, map[string]any{"name": "tool_selection", "description": "Select exactly one of the offered candidates by its id.", "input_schema": bare}},
	} {
		got, err := SelectionSchema(ids, tc.variant)
		if err != nil {
			t.Fatalf("%s: %v", tc.variant, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tc.want)
			t.Errorf("%s:\n got %s\nwant %s", tc.variant, g, w)
		}
	}

	// The bare schema is a valid 2020-12 schema that admits exactly the ids.
	s, err := SelectionSchema(ids, SchemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("sel.json", s); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("sel.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"selection":"github:list_repos#da62b2ed"}`, true},
		{`{"selection":"github:list_repos"}`, false},
		{`{}`, false},
		{`{"selection":"github:list_repos#da62b2ed","why":"x"}`, false},
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(tc.doc))
		if err := sch.Validate(v); (err == nil) != tc.ok {
			t.Errorf("%s: valid=%v, want %v", tc.doc, err == nil, tc.ok)
		}
	}

	// Fresh maps on every call.
	a, _ := SelectionSchema(ids, SchemaJSON)
	a["type"] = "mutated"
	if b, _ := SelectionSchema(ids, SchemaJSON); b["type"] != "object" {
		t.Error("SelectionSchema returned shared state")
	}

	for _, tc := range []struct {
		name    string
		ids     []string
		variant string
	}{
		{"no candidates", nil, SchemaJSON},
		{"empty list", []string{}, SchemaOpenAI},
		{"empty id", []string{"a:b", ""}, SchemaJSON},
		{"unknown variant", ids, "gemini"},
		{"empty variant", ids, ""},
	} {
		if _, err := SelectionSchema(tc.ids, tc.variant); !errors.Is(err, ErrArgsInvalid) {
			t.Errorf("%s: %v, want ErrArgsInvalid", tc.name, err)
		}
	}
}

func TestValidateSelection(t *testing.T) {
	cands := []string{
		"github:create_issue#34afee88",
		"github:create_issue_comment#0badf00d",
		"github:list_repos#da62b2ed",
		"Slack:Send#00000001",
		"slack:send#00000002",
		"slack:post#00000003",
	}
	for _, tc := range []struct {
		name, in string
		cands    []string
		status   SelectionStatus
		id       string
	}{
		{"exact", "github:list_repos#da62b2ed", cands, SelectionAccepted, "github:list_repos#da62b2ed"},
		{"exact, mixed case candidate", "Slack:Send#00000001", cands, SelectionAccepted, "Slack:Send#00000001"},
		{"whitespace trimmed", "  github:list_repos#da62b2ed\n", cands, SelectionRepaired, "github:list_repos#da62b2ed"},
		{"case folded", "GITHUB:LIST_REPOS#DA62B2ED", cands, SelectionRepaired, "github:list_repos#da62b2ed"},
		{"case folded and trimmed", "\tGitHub:List_Repos#DA62B2ED ", cands, SelectionRepaired, "github:list_repos#da62b2ed"},
		{"case fold, unique by hash", "SLACK:SEND#00000001", cands, SelectionRepaired, "Slack:Send#00000001"},
		{"ambiguous case fold", "a:b", []string{"A:b", "a:B", "a:bc"}, SelectionRejected, ""},
		{"ambiguous case-folded prefix", "slack:SEND#0000000", cands, SelectionRejected, ""},
		{"unique prefix (hash dropped)", "github:list_repos", cands, SelectionRepaired, "github:list_repos#da62b2ed"},
		{"unique prefix, case folded", "Slack:Post", cands, SelectionRepaired, "slack:post#00000003"},
		{"ambiguous prefix", "github:create_issue", cands, SelectionRejected, ""},
		{"ambiguous prefix by case", "slack:send", cands, SelectionRejected, ""},
		{"unknown", "github:delete_repo", cands, SelectionRejected, ""},
		{"longer than a candidate", "github:list_repos#da62b2ed0", cands, SelectionRejected, ""},
		{"empty", "", cands, SelectionRejected, ""},
		{"blank", " \t\n", cands, SelectionRejected, ""},
		{"no candidates", "github:list_repos#da62b2ed", nil, SelectionRejected, ""},
		{"duplicate candidates are one", "GITHUB:LIST_REPOS#DA62B2ED", []string{"github:list_repos#da62b2ed", "github:list_repos#da62b2ed"}, SelectionRepaired, "github:list_repos#da62b2ed"},
		{"exact wins over prefix", "a:b", []string{"a:bc", "a:b"}, SelectionAccepted, "a:b"},
		{"exact after trim wins over case fold", " a:b ", []string{"A:B", "a:b"}, SelectionRepaired, "a:b"},
		{"case fold wins over prefix", "A:B", []string{"a:b", "a:bc"}, SelectionRepaired, "a:b"},
		{"empty candidate never matches", "", []string{""}, SelectionRejected, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateSelection(tc.in, tc.cands)
			if got.Status != tc.status || got.ID != tc.id {
				t.Fatalf("ValidateSelection(%q) = %+v, want %s %q", tc.in, got, tc.status, tc.id)
			}
			if (got.Status == SelectionAccepted) != (got.Reason == "") {
				t.Errorf("reason %q with status %s", got.Reason, got.Status)
			}
			if strings.ContainsAny(got.Reason, "\n\r\t") {
				t.Errorf("reason is not one line: %q", got.Reason)
			}
		})
	}
	long := ValidateSelection(strings.Repeat("x", 10000), cands)
	if long.Status != SelectionRejected || len(long.Reason) > 200 {
		t.Errorf("long value: %+v", long)
	}
}

func FuzzValidateSelection(f *testing.F) {
	f.Add("github:list_repos", "github:list_repos#da62b2ed", "github:list_issues#00000000")
	f.Add(" A:B ", "a:b", "A:b")
	f.Add("", "", "x")
	f.Fuzz(func(t *testing.T, sel, c1, c2 string) {
		cands := []string{c1, c2}
		got := ValidateSelection(sel, cands)
		switch got.Status {
		case SelectionAccepted:
			if got.ID != sel {
				t.Fatalf("accepted %q as %q", sel, got.ID)
			}
		case SelectionRepaired:
			if got.ID == "" || !slices.Contains(cands, got.ID) || !strings.HasPrefix(strings.ToLower(got.ID), strings.ToLower(strings.TrimSpace(sel))) && !strings.EqualFold(got.ID, strings.TrimSpace(sel)) {
				t.Fatalf("repaired %q to %q (candidates %q)", sel, got.ID, cands)
			}
		case SelectionRejected:
			if got.ID != "" {
				t.Fatalf("rejected with id %q", got.ID)
			}
		default:
			t.Fatalf("status %q", got.Status)
		}
		if strings.ContainsAny(got.Reason, "\n\r") {
			t.Fatalf("reason is not one line: %q", got.Reason)
		}
	})
}
