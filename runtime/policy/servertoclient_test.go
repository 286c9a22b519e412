package policy

import (
	"slices"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/identity"
)

// s2cPolicy exercises the server-to-client actions (sample, elicit).
const s2cPolicy = `
policy_id: s2c
rules:
  - id: block-evil
    priority: 1000
    effect: deny
    reason_codes: [BLOCKLISTED]
    match: {server: "evil*"}
  - id: vault-elicit-needs-approval
    priority: 100
    effect: require_approval
    reason_codes: [SECRETS]
    match: {action: [elicit], tool_id: "vault:*"}
  - id: sre-sample-elicit
    priority: 10
    effect: allow
    match: {action: [sample, elicit], server: "git*", principal: {claims: {groups: [sre]}}}
  - id: bob-sample-docs
    priority: 10
    effect: allow
    match: {action: [sample], namespace: docs, principal: {sub: "bob*"}}
  - id: calls
    effect: allow
    match: {action: [list, call]}
`

func TestServerToClientActions(t *testing.T) {
	p, err := Parse("s2c.yaml", []byte(s2cPolicy))
	if err != nil {
		t.Fatal(err)
	}
	fleet := loadFleet(t)
	gh := Request{Principal: alice, Server: "github", Namespace: "github", ToolID: "github:list_repos#da62b2ed", Kind: "tool", Action: ActionSample}
	with := func(r Request, f func(*Request)) Request { f(&r); return r }
	tests := []struct {
		name   string
		p      *Policy
		req    Request
		effect Effect
		rule   string
		codes  []string
	}{
		{"sample allowed by server glob", p, gh, EffectAllow, "sre-sample-elicit", []string{ReasonAllowed}},
		{"elicit allowed by server glob", p, with(gh, func(r *Request) { r.Action = ActionElicit }), EffectAllow, "sre-sample-elicit", []string{ReasonAllowed}},
		{"glob matches another server", p, with(gh, func(r *Request) { r.Server = "gitlab" }), EffectAllow, "sre-sample-elicit", nil},
		{"unknown tool_id still matches a rule without tool_id", p, with(gh, func(r *Request) { r.ToolID = "" }), EffectAllow, "sre-sample-elicit", nil},
		{"empty kind is tool", p, with(gh, func(r *Request) { r.Kind = "" }), EffectAllow, "sre-sample-elicit", nil},
		{"server outside the glob denied by default", p, with(gh, func(r *Request) { r.Server = "slack" }), EffectDeny, "", []string{ReasonDenied, ReasonNoMatchingRule}},
		{"caller without the claim denied by default", p, with(gh, func(r *Request) { r.Principal = agent }), EffectDeny, "", []string{ReasonDenied, ReasonNoMatchingRule}},
		{"no caller denied by default", p, with(gh, func(r *Request) { r.Principal = identity.Principal{} }), EffectDeny, "", []string{ReasonDenied, ReasonNoMatchingRule}},
		{"the same caller's call is allowed by the list/call rule", p, with(gh, func(r *Request) { r.Principal = agent; r.Action = ActionCall }), EffectAllow, "calls", nil},
		{"sample allowed but elicit not", p, with(gh, func(r *Request) { r.Principal, r.Namespace = bob, "docs" }), EffectAllow, "bob-sample-docs", nil},
		{"elicit not allowed by a sample rule", p, with(gh, func(r *Request) { r.Principal, r.Namespace, r.Action = bob, "docs", ActionElicit }), EffectDeny, "", []string{ReasonDenied, ReasonNoMatchingRule}},
		{"rule without action denies sample", p, with(gh, func(r *Request) { r.Server = "evil-mcp" }), EffectDeny, "block-evil", []string{ReasonDenied, "BLOCKLISTED"}},
		{"require_approval is deny for elicit", p, with(gh, func(r *Request) { r.Action, r.ToolID = ActionElicit, "vault:read#12345678" }), EffectDeny, "vault-elicit-needs-approval",
			[]string{ReasonDenied, ReasonApprovalRequired, "SECRETS"}},
		{"unknown action is invalid", p, with(gh, func(r *Request) { r.Action = "sampling" }), EffectDeny, "", []string{ReasonDenied, ReasonInvalidRequest}},
		{"empty action is invalid", p, with(gh, func(r *Request) { r.Action = "" }), EffectDeny, "", []string{ReasonDenied, ReasonInvalidRequest}},
		// In fleet.yaml no rule names sample or elicit: rules without an
		// action criterion decide them.
		{"fleet: rule without action allows sample", fleet, gh, EffectAllow, "sre-everything", nil},
		{"fleet: require_approval without action is deny for sample", fleet, with(gh, func(r *Request) { r.Principal, r.Risk = agent, "CRITICAL" }), EffectDeny, "critical-needs-approval",
			[]string{ReasonDenied, ReasonApprovalRequired}},
		{"fleet: no risk counts as critical", fleet, with(gh, func(r *Request) { r.Principal, r.Action = agent, ActionElicit }), EffectDeny, "critical-needs-approval",
			[]string{ReasonDenied, ReasonApprovalRequired}},
		{"fleet: call rule does not cover sample", fleet, with(gh, func(r *Request) { r.Principal, r.Risk, r.ToolClass, r.TrustLevel = agent, "LOW", "write", "unknown" }), EffectDeny, "", []string{ReasonDenied, ReasonNoMatchingRule}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.p.Decide(tc.req)
			if d.Effect != tc.effect || d.RuleID != tc.rule {
				t.Fatalf("decision %+v, want %s by %q", d, tc.effect, tc.rule)
			}
			if d.PolicyID != tc.p.ID || d.PolicyVersion != tc.p.Version {
				t.Fatalf("decision %+v", d)
			}
			if tc.codes != nil && !slices.Equal(d.ReasonCodes, tc.codes) {
				t.Fatalf("reason codes %v, want %v", d.ReasonCodes, tc.codes)
			}
			if (d.Effect == EffectDeny) == (d.ReasonCodes[0] != ReasonDenied) {
				t.Fatalf("reason codes %v for %s", d.ReasonCodes, d.Effect)
			}
		})
	}
}

func TestServerToClientDefaultDeny(t *testing.T) {
	empty, err := Parse("empty.yaml", []byte("policy_id: none\nrules: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	var nilPolicy *Policy
	for _, action := range []string{ActionSample, ActionElicit} {
		req := Request{Principal: alice, Server: "github", ToolID: "github:x", Kind: "tool", Action: action}
		if d := empty.Decide(req); d.Effect != EffectDeny || !slices.Equal(d.ReasonCodes, []string{ReasonDenied, ReasonNoMatchingRule}) {
			t.Fatalf("%s, empty policy: %+v", action, d)
		}
		if d := nilPolicy.Decide(req); d.Effect != EffectDeny || !slices.Contains(d.ReasonCodes, ReasonNoPolicy) {
			t.Fatalf("%s, no policy: %+v", action, d)
		}
		if d := (&Engine{}).Decide(req); d.Effect != EffectDeny {
			t.Fatalf("%s, zero engine: %+v", action, d)
		}
	}
}

func TestServerToClientRuleCodesNotShared(t *testing.T) {
	p, err := Parse("s2c.yaml", []byte(s2cPolicy))
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Principal: alice, Server: "github", ToolID: "vault:read#12345678", Action: ActionElicit}
	d := p.Decide(req)
	d.ReasonCodes[0], d.ReasonCodes[1] = "X", "Y"
	if d2 := p.Decide(req); !slices.Equal(d2.ReasonCodes, []string{ReasonDenied, ReasonApprovalRequired, "SECRETS"}) {
		t.Fatalf("reason codes changed by a caller: %v", d2.ReasonCodes)
	}
	req.Action = ActionCall
	if d := p.Decide(req); d.Effect != EffectAllow {
		t.Fatalf("call: %+v", d)
	}
}

func TestServerToClient(t *testing.T) {
	for action, want := range map[string]bool{ActionSample: true, ActionElicit: true, ActionList: false, ActionCall: false, "": false, "Sample": false} {
		if got := ServerToClient(action); got != want {
			t.Errorf("ServerToClient(%q) = %v", action, got)
		}
	}
}

func TestParseServerToClientActions(t *testing.T) {
	if _, err := Parse("a.yaml", []byte("policy_id: a\nrules:\n  - {id: r, effect: allow, match: {action: [list, call, sample, elicit]}}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("a.yaml", []byte("policy_id: a\nrules:\n  - {id: r, effect: allow, match: {action: [sampling]}}\n")); err == nil {
		t.Fatal("unknown action parsed")
	}
}
