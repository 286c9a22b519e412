package policy

import (
	"os"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/identity"
)

// FuzzParse: Parse never panics, and whatever it accepts decides without
// panicking and denies a request no rule could match.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/fleet.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{"", "policy_id: a\nrules: []\n", "policy_id: a\nrules:\n  - {id: r, effect: allow, match: {tool_id: ['*']}}\n",
		"a: &a [*a]", "policy_id: a\nrules:\n  - {id: r, effect: require_approval, match: {action: [sample, elicit]}}\n", "policy_id: a\nrules: [{id: r, effect: deny, match: {principal: {claims: {x: [1, true, 's']}}}}]\n", "{\"policy_id\": 1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, action := range []string{ActionList, ActionCall, ActionSample, ActionElicit, "other"} {
			d := p.Decide(Request{Principal: identity.Principal{Sub: "fuzz", Claims: map[string]any{"x": []any{1.0, "s"}}}, ToolID: "a:b", Action: action})
			if d.PolicyID != p.ID || len(d.ReasonCodes) == 0 {
				t.Fatalf("decision %+v", d)
			}
			if action == "other" && d.Effect != EffectDeny {
				t.Fatalf("invalid action allowed: %+v", d)
			}
			if ServerToClient(action) && d.Effect == EffectRequireApproval {
				t.Fatalf("%s needs an approval: %+v", action, d)
			}
		}
	})
}
