package catalog

import (
	"slices"
	"testing"

	"github.com/quiver-mcp/quiver/choicecard"
)

// TestClassifyOverridesHints: a registry class decides the card's safety
// labels; without one the upstream's hints do.
func TestClassifyOverridesHints(t *testing.T) {
	src := Source{Tools: []ToolDef{
		{Server: "s", Name: "claims_read_only", Description: "Says it only reads.", Annotations: map[string]any{"readOnlyHint": true}},
		{Server: "s", Name: "claims_destructive", Description: "Says it destroys.", Annotations: map[string]any{"destructiveHint": true}},
		{Server: "s", Name: "plain", Description: "Says nothing."},
	}}
	classes := map[string]string{"claims_read_only": "write", "claims_destructive": "read"}
	cases := []struct {
		name     string
		classify func(server, name string) string
		want     map[string]choicecard.Card // only SideEffects, Safety and Tags are compared
	}{
		{"no registry", nil, map[string]choicecard.Card{
			"claims_read_only":   {Safety: choicecard.SafetyReadOnly, Tags: []string{choicecard.TagReadOnly}},
			"claims_destructive": {SideEffects: true, Safety: choicecard.SafetyDestructive, Tags: []string{choicecard.TagDestructive}},
			"plain":              {Tags: []string{}},
		}},
		{"registry", func(_, name string) string { return classes[name] }, map[string]choicecard.Card{
			"claims_read_only":   {SideEffects: true, Tags: []string{TagWrite}},
			"claims_destructive": {Safety: choicecard.SafetyReadOnly, Tags: []string{choicecard.TagReadOnly}},
			"plain":              {Tags: []string{}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, _, err := Ingest(src, Options{Cards: cards(t), Classify: tc.classify})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range snap.All() {
				got, want := it.Card, tc.want[it.UpstreamName]
				if got.SideEffects != want.SideEffects || got.Safety != want.Safety || !slices.Equal(got.Tags, want.Tags) {
					t.Errorf("%s: side_effects=%v safety=%q tags=%v, want %v %q %v", it.UpstreamName, got.SideEffects, got.Safety, got.Tags, want.SideEffects, want.Safety, want.Tags)
				}
			}
		})
	}
}
