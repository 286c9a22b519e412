package policy

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/identity"
)

func loadFleet(t testing.TB) *Policy {
	t.Helper()
	p, err := Load("testdata/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	alice = identity.Principal{Sub: "alice", ActorType: "user", Issuer: "corp", Claims: map[string]any{"groups": []any{"eng", "sre"}}}
	bob   = identity.Principal{Sub: "bob.smith", ActorType: "user", Issuer: "corp"}
	agent = identity.Principal{Sub: "agent-1", ActorType: "agent", OrgID: "acme", Issuer: "ci"}
	carol = identity.Principal{Sub: "carol", ActorType: "user", Issuer: "corp",
		Claims: map[string]any{"level": float64(3), "email_verified": true, "org": map[string]any{"tier": "gold"}}}
)

func TestDecide(t *testing.T) {
	p := loadFleet(t)
	read := Request{Server: "github", Namespace: "github", ToolID: "github:list_repos#da62b2ed", ToolClass: "read", Risk: "LOW", TrustLevel: "verified", Action: ActionCall}
	with := func(r Request, f func(*Request)) Request { f(&r); return r }
	tests := []struct {
		name   string
		req    Request
		effect Effect
		rule   string
	}{
		{"no principal matches nothing principal-bound", read, EffectDeny, ""},
		{"blocklisted server beats everything", with(read, func(r *Request) { r.Principal, r.Server = alice, "evil-corp" }), EffectDeny, "block-evil"},
		{"sre claim allows", with(read, func(r *Request) { r.Principal = alice }), EffectAllow, "sre-everything"},
		{"sre claim beats approval (priority 100 > 50)", with(read, func(r *Request) { r.Principal, r.Risk = alice, "CRITICAL" }), EffectAllow, "sre-everything"},
		{"critical needs approval", with(read, func(r *Request) { r.Principal, r.Risk = agent, "CRITICAL" }), EffectRequireApproval, "critical-needs-approval"},
		{"unknown risk counts as critical", with(read, func(r *Request) { r.Principal, r.Risk = agent, "bogus" }), EffectRequireApproval, "critical-needs-approval"},
		{"lower-case risk", with(read, func(r *Request) { r.Principal, r.Risk = agent, "critical" }), EffectRequireApproval, "critical-needs-approval"},
		{"unknown trust counts as unknown", with(read, func(r *Request) { r.Principal, r.TrustLevel = agent, "" }), EffectDeny, ""},
		{"ties in file order: critical rule first", with(read, func(r *Request) { r.Principal, r.Risk, r.ToolClass = agent, "CRITICAL", "write" }), EffectRequireApproval, "critical-needs-approval"},
		{"write call needs approval", with(read, func(r *Request) { r.Principal, r.ToolClass = agent, "write" }), EffectRequireApproval, "writes-need-approval"},
		{"write list is allowed to agent", with(read, func(r *Request) { r.Principal, r.ToolClass, r.Action = agent, "write", ActionList }), EffectAllow, "agents-read-trusted"},
		{"agent reads verified", with(read, func(r *Request) { r.Principal = agent }), EffectAllow, "agents-read-trusted"},
		{"agent reads internal (min_trust)", with(read, func(r *Request) { r.Principal, r.TrustLevel = agent, "internal" }), EffectAllow, "agents-read-trusted"},
		{"agent denied community", with(read, func(r *Request) { r.Principal, r.TrustLevel = agent, "community" }), EffectDeny, ""},
		{"agent of another org denied", with(read, func(r *Request) { r.Principal = identity.Principal{Sub: "a", ActorType: "agent", OrgID: "other"} }), EffectDeny, ""},
		{"bob github glob", with(read, func(r *Request) { r.Principal = bob }), EffectAllow, "bob-github"},
		{"bob other namespace", with(read, func(r *Request) { r.Principal, r.ToolID = bob, "slack:send#283a5dcf" }), EffectDeny, ""},
		{"bob resource kind", with(read, func(r *Request) { r.Principal, r.Kind = bob, "resource" }), EffectDeny, ""},
		{"bob from another issuer", with(read, func(r *Request) { r.Principal = bob; r.Principal.Issuer = "ci" }), EffectDeny, ""},
		{"claims: number, bool, dotted path", with(read, func(r *Request) { r.Principal, r.Namespace = carol, "docs" }), EffectAllow, "level-3"},
		{"namespace ? glob", with(read, func(r *Request) { r.Principal, r.Namespace = carol, "wiki-1" }), EffectAllow, "level-3"},
		{"namespace ? glob is one char", with(read, func(r *Request) { r.Principal, r.Namespace = carol, "wiki-12" }), EffectDeny, ""},
		{"claim value mismatch", with(read, func(r *Request) {
			r.Principal, r.Namespace = carol, "docs"
			r.Principal.Claims = map[string]any{"level": float64(2), "email_verified": true, "org": map[string]any{"tier": "gold"}}
		}), EffectDeny, ""},
		{"invalid action", with(read, func(r *Request) { r.Principal, r.Action = alice, "delete" }), EffectDeny, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Effect != tc.effect || d.RuleID != tc.rule {
				t.Fatalf("decision %+v, want %s by %q", d, tc.effect, tc.rule)
			}
			if d.PolicyID != "fleet" || !strings.HasPrefix(d.PolicyVersion, "sha256:") {
				t.Fatalf("decision %+v", d)
			}
			switch tc.effect {
			case EffectDeny:
				if d.ReasonCodes[0] != ReasonDenied {
					t.Fatalf("reason codes %v", d.ReasonCodes)
				}
			case EffectAllow:
				if d.ReasonCodes[0] != ReasonAllowed {
					t.Fatalf("reason codes %v", d.ReasonCodes)
				}
			case EffectRequireApproval:
				if d.ReasonCodes[0] != ReasonApprovalRequired {
					t.Fatalf("reason codes %v", d.ReasonCodes)
				}
			}
		})
	}
}

func TestDefaultDeny(t *testing.T) {
	p, err := Parse("empty.yaml", []byte("policy_id: none\nrules: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := p.Decide(Request{Principal: alice, ToolID: "x:y", Action: ActionCall})
	if d.Effect != EffectDeny || !slices.Equal(d.ReasonCodes, []string{ReasonDenied, ReasonNoMatchingRule}) || d.Visible() {
		t.Fatalf("%+v", d)
	}
	var nilPolicy *Policy
	d = nilPolicy.Decide(Request{Principal: alice, Action: ActionCall})
	if d.Effect != EffectDeny || !slices.Contains(d.ReasonCodes, ReasonNoPolicy) {
		t.Fatalf("%+v", d)
	}
	d = (&Engine{}).Decide(Request{Principal: alice, Action: ActionList})
	if d.Effect != EffectDeny {
		t.Fatalf("zero engine: %+v", d)
	}
	p = loadFleet(t)
	d = p.Decide(Request{Principal: alice, Server: "evil", Action: ActionCall})
	if !slices.Equal(d.ReasonCodes, []string{ReasonDenied, "BLOCKLISTED"}) {
		t.Fatalf("rule reason codes: %v", d.ReasonCodes)
	}
}

// TestDiscoveryFiltering is spec 001 conformance test 1 at unit level: two
// principals see different tool lists from one policy, and each sees
// exactly the tools it may call (or call after approval).
func TestDiscoveryFiltering(t *testing.T) {
	p, err := Parse("two.yaml", []byte(`
policy_id: two
rules:
  - {id: a-docs, effect: allow, match: {principal: {sub: principal-a}, namespace: docs}}
  - {id: b-all, effect: allow, match: {principal: {sub: principal-b}}}
  - {id: b-x-approval, priority: 10, effect: require_approval, match: {principal: {sub: principal-b}, tool_id: "github:delete_repo*"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	tools := []Request{
		{Server: "docs", Namespace: "docs", ToolID: "docs:search#11111111"},
		{Server: "github", Namespace: "github", ToolID: "github:delete_repo#22222222"},
	}
	visible := func(pr identity.Principal) []string {
		var out []string
		for _, r := range tools {
			r.Principal, r.Action = pr, ActionList
			if p.Decide(r).Visible() {
				out = append(out, r.ToolID)
			}
		}
		return out
	}
	a := identity.Principal{Sub: "principal-a", Issuer: "corp"}
	b := identity.Principal{Sub: "principal-b", Issuer: "corp"}
	if got := visible(a); !slices.Equal(got, []string{"docs:search#11111111"}) {
		t.Fatalf("A sees %v", got)
	}
	if got := visible(b); !slices.Equal(got, []string{"docs:search#11111111", "github:delete_repo#22222222"}) {
		t.Fatalf("B sees %v", got)
	}
	call := tools[1]
	call.Action = ActionCall
	call.Principal = a
	if d := p.Decide(call); d.Effect != EffectDeny || d.ReasonCodes[0] != ReasonDenied {
		t.Fatalf("A calls X: %+v", d)
	}
	call.Principal = b
	if d := p.Decide(call); d.Effect != EffectRequireApproval {
		t.Fatalf("B calls X: %+v", d)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		msg  string
	}{
		{"empty", "", 0, "empty"},
		{"not yaml", "policy_id: [", 0, "not valid YAML"},
		{"two documents", "policy_id: a\nrules: []\n---\npolicy_id: b\n", 4, "more than one"},
		{"unknown key", "policy_id: a\nrules: []\nrulez: []\n", 3, "rulez"},
		{"missing rules", "policy_id: a\n", 1, "rules"},
		{"bad effect", "policy_id: a\nrules:\n  - id: r\n    effect: maybe\n", 4, ""},
		{"unknown match key", "policy_id: a\nrules:\n  - id: r\n    effect: allow\n    match: {tool: x}\n", 5, "tool"},
		{"bad risk", "policy_id: a\nrules:\n  - id: r\n    effect: allow\n    match: {max_risk: HUGE}\n", 5, ""},
		{"duplicate rule id", "policy_id: a\nrules:\n  - {id: r, effect: allow}\n  - {id: r, effect: deny}\n", 4, "used by rules[0]"},
		{"duplicate key", "policy_id: a\npolicy_id: b\nrules: []\n", 2, "duplicate key"},
		{"bad glob", "policy_id: a\nrules:\n  - {id: r, effect: allow, match: {tool_id: 'x\\'}}\n", 3, "lone"},
		{"claim value object", "policy_id: a\nrules:\n  - {id: r, effect: allow, match: {principal: {claims: {x: {y: 1}}}}}\n", 3, ""},
		{"merge key", "a: &a {policy_id: x}\n<<: *a\n", 2, "merge"},
		{"not an object", "- 1\n- 2\n", 1, ""},
		{"bad policy id", "policy_id: 'has space'\nrules: []\n", 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("parsed")
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("%v does not match ErrInvalidPolicy", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%T", err)
			}
			if pe.Line != tc.line || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "p.yaml") {
				t.Fatalf("error %q (line %d), want line %d and %q", err, pe.Line, tc.line, tc.msg)
			}
		})
	}
	if _, err := Load("testdata/missing.yaml"); !errors.Is(err, ErrInvalidPolicy) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	big := "policy_id: a\nrules: []\n#" + strings.Repeat("x", MaxFileSize)
	if _, err := Parse("big.yaml", []byte(big)); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("big: %v", err)
	}
}

func TestVersionIsCanonical(t *testing.T) {
	y, err := Parse("a.yaml", []byte("policy_id: v\nrules:\n  - id: r\n    effect: allow\n    match: {server: s, action: [call]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := Parse("a.json", []byte(`{"$schema": "x", "rules": [{"match": {"action": ["call"], "server": ["s"]}, "effect": "allow", "id": "r"}], "policy_id": "v"}`))
	if err != nil {
		t.Fatal(err)
	}
	if y.Version != j.Version {
		t.Fatalf("versions differ: %s %s", y.Version, j.Version)
	}
	o, _ := Parse("b.yaml", []byte("policy_id: v\nrules:\n  - id: r\n    effect: deny\n    match: {server: s, action: [call]}\n"))
	if o.Version == y.Version {
		t.Fatal("different policies share a version")
	}
	if f := y.File(); f.PolicyID != "v" || len(f.Rules) != 1 || f.Rules[0].Match.Server[0] != "s" {
		t.Fatalf("%+v", f)
	}
}
