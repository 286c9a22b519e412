package policy

import (
	"fmt"
	"strconv"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
)

// Access modes of an access declaration (spec 004 "Tool Access
// Declaration").
const (
	// ModeOpen: every tool is accessible; matching rules add
	// requirements.
	ModeOpen = "open"
	// ModeAllowlist: only tools of a live rule are accessible, with its
	// requirements; others get the default (deny unless set).
	ModeAllowlist = "allowlist"
	// ModeDenylist: tools of a live rule are denied; others get the
	// default (allow unless set).
	ModeDenylist = "denylist"
)

// Reason codes added by access declarations.
const (
	// ReasonAccessDenied: an access declaration denies the tool to the
	// principal.
	ReasonAccessDenied = "ACCESS_DENIED"
	// ReasonCapabilityRequired: the call must present a capability token.
	ReasonCapabilityRequired = "CAPABILITY_REQUIRED"
)

// Access is one access declaration of a policy file: for the principals it
// matches (every principal when Principal is absent), which tools they may
// reach and on what terms. Declarations narrow what the rules allow, never
// widen it: a call the rules deny stays denied.
type Access struct {
	ID        string          `json:"id"`
	Principal *PrincipalMatch `json:"principal,omitempty"`
	// Mode is open, allowlist or denylist.
	Mode string `json:"mode"`
	// Default is the effect (allow or deny) for tools no live rule names;
	// absent: deny for allowlist, allow for open and denylist.
	Default Effect       `json:"default,omitempty"`
	Rules   []AccessRule `json:"rules,omitempty"`
	// Privilege is full (default) or restricted: a restricted principal's
	// calls are only requests, which a full principal with Fulfil runs
	// on its behalf (spec 004's privilege separation).
	Privilege string `json:"privilege,omitempty"`
	// Fulfil lets a full principal list and fulfil restricted principals'
	// requests.
	Fulfil bool `json:"fulfil,omitempty"`
}

// Privileges of an access declaration.
const (
	PrivilegeFull       = "full"
	PrivilegeRestricted = "restricted"
)

// Privilege answers for a principal: whether its calls are only requests
// (restricted), and whether it may fulfil others' requests. It is decided
// by the first access declaration that matches the principal; without one
// a principal is full and may not fulfil.
func (p *Policy) Privilege(who identity.Principal) (restricted, fulfil bool) {
	if p == nil {
		return false, false
	}
	for _, a := range p.accesses {
		if a.principal != nil && !a.principal.matches(who) {
			continue
		}
		restricted = a.Privilege == PrivilegeRestricted
		return restricted, a.Fulfil && !restricted
	}
	return false, false
}

// SeparatesPrivileges reports whether some access declaration makes
// principals restricted or lets them fulfil requests.
func (p *Policy) SeparatesPrivileges() bool {
	if p == nil {
		return false
	}
	for _, a := range p.accesses {
		if a.Privilege == PrivilegeRestricted || a.Fulfil {
			return true
		}
	}
	return false
}

// AccessRule names tools (tool_id globs) and the terms of reaching them.
type AccessRule struct {
	Tools Values `json:"tools"`
	// Expires ends the rule: past it the rule no longer matches.
	Expires *time.Time `json:"expires,omitempty"`
	// RequiresApproval makes each call wait for an operator's approval;
	// with RequiresCapability, the operator approves the capability
	// request instead.
	RequiresApproval bool `json:"requires_approval,omitempty"`
	// RequiresCapability makes a call present a capability token.
	RequiresCapability bool `json:"requires_capability,omitempty"`
}

type compiledAccess struct {
	Access
	principal *compiledPrincipal // nil: every principal, anonymous ones too
	rules     []compiledAccessRule
}

type compiledAccessRule struct {
	AccessRule
	tools globSet
}

func compileAccess(a Access) (*compiledAccess, error) {
	ca := &compiledAccess{Access: a}
	if a.Principal != nil {
		cr, err := compileRule(Rule{Match: Match{Principal: a.Principal}}, &Policy{})
		if err != nil {
			return nil, err
		}
		ca.principal = cr.principal
	}
	for i, r := range a.Rules {
		g, err := compileGlobs("rules["+strconv.Itoa(i)+"].tools", r.Tools)
		if err != nil {
			return nil, err
		}
		ca.rules = append(ca.rules, compiledAccessRule{AccessRule: r, tools: g})
	}
	if ca.Default == "" {
		ca.Default = EffectAllow
		if a.Mode == ModeAllowlist {
			ca.Default = EffectDeny
		}
	}
	if ca.Default != EffectAllow && ca.Default != EffectDeny {
		return nil, fmt.Errorf("default must be allow or deny")
	}
	return ca, nil
}

// RequiresCapabilities reports whether some access rule requires a
// capability token (a nil policy requires none).
func (p *Policy) RequiresCapabilities() bool {
	if p == nil {
		return false
	}
	for _, a := range p.accesses {
		for _, r := range a.rules {
			if r.RequiresCapability {
				return true
			}
		}
	}
	return false
}

// access applies the first access declaration that matches the caller to
// a decision of the rules. Only tool listings and calls are concerned.
func (p *Policy) access(req *Request, d Decision) Decision {
	if len(p.accesses) == 0 || d.Effect == EffectDeny || (req.Action != ActionList && req.Action != ActionCall) || req.Kind != "tool" {
		return d
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	for _, a := range p.accesses {
		if a.principal != nil && !a.principal.matches(req.Principal) {
			continue
		}
		return a.decide(req, now, d)
	}
	return d
}

func (a *compiledAccess) decide(req *Request, now time.Time, d Decision) Decision {
	var hit *compiledAccessRule
	for i := range a.rules {
		r := &a.rules[i]
		if r.Expires != nil && !now.Before(*r.Expires) {
			continue
		}
		if r.tools.match(req.ToolID) {
			hit = r
			break
		}
	}
	deny := func() Decision {
		return Decision{Effect: EffectDeny, PolicyID: d.PolicyID, PolicyVersion: d.PolicyVersion, RuleID: "access:" + a.ID,
			ReasonCodes: []string{ReasonDenied, ReasonAccessDenied}}
	}
	switch {
	case hit == nil && a.Default == EffectDeny:
		return deny()
	case hit == nil:
		return d
	case a.Mode == ModeDenylist:
		return deny()
	}
	if hit.RequiresCapability {
		d.RequiresCapability = true
		d.ReasonCodes = append(d.ReasonCodes, ReasonCapabilityRequired)
		// The approval, if any, is of the capability request.
		d.CapabilityApproval = d.CapabilityApproval || hit.RequiresApproval
		return d
	}
	if hit.RequiresApproval && d.Effect == EffectAllow {
		d.Effect = EffectRequireApproval
		d.ReasonCodes = append([]string{ReasonApprovalRequired}, d.ReasonCodes[1:]...)
	}
	return d
}
