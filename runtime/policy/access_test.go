package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
)

const accessPolicy = `
policy_id: caps
rules:
  - {id: all, effect: allow}
access:
  - id: agents
    principal: {claims: {role: agent}}
    mode: allowlist
    rules:
      - {tools: ["fx:read*"]}
      - {tools: ["fx:deploy*"], requires_capability: true}
      - {tools: ["fx:pay*"], requires_capability: true, requires_approval: true}
      - {tools: ["fx:ask*"], requires_approval: true}
      - {tools: ["fx:old*"], expires: "2026-01-01T00:00:00Z"}
  - id: interns
    principal: {sub: intern}
    mode: denylist
    rules:
      - {tools: ["fx:deploy*"]}
  - id: everyone
    mode: open
    rules:
      - {tools: ["fx:deploy*"], requires_capability: true}
`

func TestAccessDeclarations(t *testing.T) {
	p, err := Parse("access.yaml", []byte(accessPolicy))
	if err != nil {
		t.Fatal(err)
	}
	agent := identity.Principal{Sub: "bot", Issuer: "t", Claims: map[string]any{"role": "agent"}}
	intern := identity.Principal{Sub: "intern", Issuer: "t"}
	human := identity.Principal{Sub: "ann", Issuer: "t"}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	type want struct {
		effect Effect
		cap    bool
		capApp bool
	}
	for _, tc := range []struct {
		who  identity.Principal
		tool string
		want want
	}{
		{agent, "fx:read_file", want{EffectAllow, false, false}},
		{agent, "fx:deploy", want{EffectAllow, true, false}},
		{agent, "fx:pay", want{EffectAllow, true, true}},
		{agent, "fx:ask", want{EffectRequireApproval, false, false}},
		{agent, "fx:old_tool", want{EffectDeny, false, false}}, // expired rule: allowlist default
		{agent, "fx:write", want{EffectDeny, false, false}},
		{intern, "fx:deploy", want{EffectDeny, false, false}},
		{intern, "fx:write", want{EffectAllow, false, false}},
		{human, "fx:deploy", want{EffectAllow, true, false}},
		{human, "fx:write", want{EffectAllow, false, false}},
		{identity.Principal{}, "fx:deploy", want{EffectAllow, true, false}},
	} {
		d := p.Decide(Request{Principal: tc.who, ToolID: tc.tool, Action: ActionCall, Now: now})
		got := want{d.Effect, d.RequiresCapability, d.CapabilityApproval}
		if got != tc.want {
			t.Errorf("%s %s: %+v, want %+v (%v)", tc.who.Sub, tc.tool, got, tc.want, d.ReasonCodes)
		}
		l := p.Decide(Request{Principal: tc.who, ToolID: tc.tool, Action: ActionList, Now: now})
		if l.Visible() != (tc.want.effect != EffectDeny) {
			t.Errorf("%s %s: visible %v", tc.who.Sub, tc.tool, l.Visible())
		}
	}
	// Before its expiry the old rule holds.
	if d := p.Decide(Request{Principal: agent, ToolID: "fx:old_tool", Action: ActionCall, Now: now.AddDate(-1, 0, 0)}); d.Effect != EffectAllow {
		t.Errorf("unexpired rule: %v", d.Effect)
	}
	// Declarations never widen: a rule-denied call stays denied.
	q, err := Parse("narrow.yaml", []byte("policy_id: n\nrules: []\naccess:\n  - {id: open, mode: open}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := q.Decide(Request{Principal: human, ToolID: "fx:read", Action: ActionCall}); d.Effect != EffectDeny {
		t.Errorf("access widened a deny: %v", d.Effect)
	}
}

func TestAccessParseErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"bad mode":     "policy_id: p\nrules: []\naccess:\n  - {id: a, mode: sometimes}\n",
		"bad expires":  "policy_id: p\nrules: []\naccess:\n  - {id: a, mode: open, rules: [{tools: x, expires: tomorrow}]}\n",
		"duplicate id": "policy_id: p\nrules: []\naccess:\n  - {id: a, mode: open}\n  - {id: a, mode: open}\n",
		"unknown key":  "policy_id: p\nrules: []\naccess:\n  - {id: a, mode: open, rules: [{tools: x, needs_capability: true}]}\n",
		"no tools":     "policy_id: p\nrules: []\naccess:\n  - {id: a, mode: open, rules: [{requires_capability: true}]}\n",
	} {
		if _, err := Parse(name, []byte(doc)); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPrivilege(t *testing.T) {
	p, err := Parse("priv.yaml", []byte(`policy_id: priv
rules: [{id: all, effect: allow}]
access:
  - {id: bots, principal: {actor_type: agent}, mode: open, privilege: restricted, fulfil: true}
  - {id: ops, principal: {sub: op}, mode: open, fulfil: true}
  - {id: rest, mode: open}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who                 identity.Principal
		restricted, fulfils bool
	}{
		{identity.Principal{Sub: "bot", ActorType: "agent", Issuer: "t"}, true, false}, // restricted never fulfils
		{identity.Principal{Sub: "op", ActorType: "user", Issuer: "t"}, false, true},
		{identity.Principal{Sub: "ann", ActorType: "user", Issuer: "t"}, false, false},
	} {
		r, f := p.Privilege(tc.who)
		if r != tc.restricted || f != tc.fulfils {
			t.Errorf("%s: restricted %v fulfil %v", tc.who.Sub, r, f)
		}
	}
	if !p.SeparatesPrivileges() || (*Policy)(nil).SeparatesPrivileges() {
		t.Error("SeparatesPrivileges")
	}
}
