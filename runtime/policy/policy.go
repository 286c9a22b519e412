// Package policy decides who may see and call which tools (spec 001 MUSTs
// 3 and 4), holds the operator approvals that let a require_approval call
// proceed, and keeps the incident-mode state (MUST 9: kill switch,
// revocation, quarantine).
//
// A policy is one YAML (or JSON) file validated against
// schemas/policy.schema.json:
//
//	policy_id: fleet
//	rules:
//	  - id: sre-everything
//	    priority: 100
//	    effect: allow
//	    match: {principal: {claims: {groups: [sre]}}}
//	  - id: writes-need-approval
//	    priority: 50
//	    effect: require_approval
//	    match: {tool_class: [write], max_risk: HIGH}
//	  - id: agents-read
//	    effect: allow
//	    match: {principal: {actor_type: agent}, tool_class: [read], min_trust: verified}
//
// Rules are tried highest priority first (equal priorities in file order);
// the first whose match holds decides, and when none does the answer is
// deny with POLICY_DENIED. The same policy decides visibility (action
// "list": a tool is listed when the decision is not deny) and invocation
// (action "call").
//
// It also decides the server-to-client requests an upstream server sends
// while a call is in flight and that the gateway would forward to the
// client: action "sample" (sampling/createMessage) and action "elicit"
// (elicitation/create). Such a request is decided for the caller of the
// call, with server the upstream, tool_id the tool being called (empty
// when unknown) and kind tool; it carries no tool_class, risk or trust
// level unless the caller of Decide fills them in. Default-deny holds for
// them too: a policy must allow "sample" and "elicit" by a rule that
// matches them, or they are denied. Like every absent criterion, an absent
// action holds for any action, so a rule without one (such as an allow for
// a whole group) covers sample and elicit as well; give broad rules
// action: [list, call] to keep them out. There is no approval flow for
// these requests: a require_approval rule that matches one is decided as
// deny (POLICY_DENIED, then APPROVAL_REQUIRED and the rule's codes).
package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxFileSize is the largest policy file accepted.
const MaxFileSize = 1 << 20

// Effect is what a decision lets happen.
type Effect string

// The effects.
const (
	EffectAllow           Effect = "allow"
	EffectDeny            Effect = "deny"
	EffectRequireApproval Effect = "require_approval"
)

// Actions a request can ask for.
const (
	// ActionList asks whether a tool is visible (tools/list, browse).
	ActionList = "list"
	// ActionCall asks whether a tool may be invoked.
	ActionCall = "call"
	// ActionSample asks whether an upstream's sampling/createMessage
	// request, sent during a call, may be forwarded to the client.
	ActionSample = "sample"
	// ActionElicit asks whether an upstream's elicitation/create request,
	// sent during a call, may be forwarded to the client.
	ActionElicit = "elicit"
)

// validAction reports whether Decide knows action.
func validAction(action string) bool {
	switch action {
	case ActionList, ActionCall, ActionSample, ActionElicit:
		return true
	}
	return false
}

// ServerToClient reports whether action is one of a request an upstream
// server sends to the client (ActionSample, ActionElicit). Decide never
// returns require_approval for those: there is no approval flow for them.
func ServerToClient(action string) bool {
	return action == ActionSample || action == ActionElicit
}

// Reason codes of decisions.
const (
	ReasonAllowed          = "POLICY_ALLOWED"
	ReasonDenied           = "POLICY_DENIED"
	ReasonApprovalRequired = "APPROVAL_REQUIRED"
	ReasonNoMatchingRule   = "NO_MATCHING_RULE"
	ReasonNoPolicy         = "NO_POLICY"
	ReasonInvalidRequest   = "INVALID_REQUEST"
)

// ErrInvalidPolicy is matched (with errors.Is) by every error of Parse and
// Load.
var ErrInvalidPolicy = errors.New("invalid policy")

// ParseError is one problem with a policy file.
type ParseError struct {
	// File is the name given to Parse or Load.
	File string
	// Line is 1-based; 0 when unknown.
	Line int
	// Field is a JSON pointer to the value concerned, "" for the file.
	Field string
	// Msg says what is wrong, in one line.
	Msg string
	// Err is the underlying cause, if any.
	Err error
}

// Error formats the problem as FILE:LINE: FIELD: MSG.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// Is makes every *ParseError match ErrInvalidPolicy.
func (e *ParseError) Is(target error) bool { return target == ErrInvalidPolicy }

// Request is what a decision is asked about.
type Request struct {
	// Principal is the caller (for ActionSample and ActionElicit, the
	// caller of the call in flight).
	Principal identity.Principal
	// Server is the upstream server id (for ActionSample and ActionElicit,
	// the upstream that sent the request); Namespace the tool_id
	// namespace.
	Server    string
	Namespace string
	// ToolID is quiver's tool_id (or resource::/prompt:: id); for
	// ActionSample and ActionElicit, the tool_id of the call in flight, ""
	// when unknown.
	ToolID string
	// ToolClass is the registry classification: read, write or
	// unclassified.
	ToolClass string
	// Risk is LOW, MEDIUM, HIGH or CRITICAL; anything else counts as
	// CRITICAL.
	Risk string
	// TrustLevel is internal, verified, community or unknown; anything
	// else counts as unknown.
	TrustLevel string
	// Kind is tool (default), resource or prompt.
	Kind string
	// Action is ActionList, ActionCall, ActionSample or ActionElicit;
	// anything else is denied with INVALID_REQUEST.
	Action string
	// SessionID is the MCP session (used by incident quarantine, not by
	// policy rules).
	SessionID string
	// Now is the time access rules' expiry is judged at (zero: the
	// clock).
	Now time.Time
	// Egress is true when the call reaches the network: its upstream's
	// tools do (an egress allowlist or a sandbox network), or its
	// arguments name a network destination (used by incident mode's
	// egress block, not by policy rules).
	Egress bool
}

// Decision is the answer to a Request.
type Decision struct {
	Effect Effect `json:"effect"`
	// PolicyID and PolicyVersion name the policy that decided.
	PolicyID      string `json:"policy_id"`
	PolicyVersion string `json:"policy_version,omitempty"`
	// RuleID is the rule that matched, "" when none did.
	RuleID string `json:"rule_id,omitempty"`
	// ReasonCodes explain the effect: POLICY_ALLOWED, POLICY_DENIED or
	// APPROVAL_REQUIRED first, then NO_MATCHING_RULE / NO_POLICY /
	// INVALID_REQUEST or the rule's own codes. A require_approval rule
	// that matched an ActionSample or ActionElicit request gives deny with
	// POLICY_DENIED, APPROVAL_REQUIRED, then the rule's own codes.
	ReasonCodes []string `json:"reason_codes"`
	// RequiresCapability is set when an access declaration makes the call
	// present a capability token (reason code CAPABILITY_REQUIRED);
	// CapabilityApproval when a request for that capability waits for an
	// operator.
	RequiresCapability bool `json:"requires_capability,omitempty"`
	CapabilityApproval bool `json:"capability_approval,omitempty"`
}

// Allowed reports whether the decision lets a call proceed without an
// approval.
func (d Decision) Allowed() bool { return d.Effect == EffectAllow }

// Visible reports whether the decision lets a tool be listed: allowed
// tools and tools that require approval are visible.
func (d Decision) Visible() bool {
	return d.Effect == EffectAllow || d.Effect == EffectRequireApproval
}

// Values is a list of strings written as one string or a list.
type Values []string

// UnmarshalJSON accepts "x" or ["x", ...].
func (v *Values) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = Values{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	*v = l
	return nil
}

// Scalars is a list of claim values (string, json.Number or bool) written
// as one value or a list.
type Scalars []any

// UnmarshalJSON accepts a scalar or a list of scalars.
func (s *Scalars) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if l, ok := v.([]any); ok {
		*s = l
	} else {
		*s = Scalars{v}
	}
	return nil
}

// File is a policy file as written.
type File struct {
	Schema      string `json:"$schema,omitempty"`
	PolicyID    string `json:"policy_id"`
	Description string `json:"description,omitempty"`
	Rules       []Rule `json:"rules"`
	// Access holds the access declarations (spec 004): per principal, which
	// tools it may reach, and whether a call needs an approval or a
	// capability token. They narrow what the rules allow.
	Access []Access `json:"access,omitempty"`
}

// Rule is one rule of a policy file.
type Rule struct {
	ID          string   `json:"id"`
	Description string   `json:"description,omitempty"`
	Priority    int      `json:"priority,omitempty"`
	Effect      Effect   `json:"effect"`
	ReasonCodes []string `json:"reason_codes,omitempty"`
	Match       Match    `json:"match,omitzero"`
}

// Match holds the criteria of a rule; absent ones hold for any value.
type Match struct {
	Action     []string        `json:"action,omitempty"`
	Kind       []string        `json:"kind,omitempty"`
	Principal  *PrincipalMatch `json:"principal,omitempty"`
	Server     Values          `json:"server,omitempty"`
	Namespace  Values          `json:"namespace,omitempty"`
	ToolID     Values          `json:"tool_id,omitempty"`
	ToolClass  []string        `json:"tool_class,omitempty"`
	Risk       []string        `json:"risk,omitempty"`
	MaxRisk    string          `json:"max_risk,omitempty"`
	TrustLevel []string        `json:"trust_level,omitempty"`
	MinTrust   string          `json:"min_trust,omitempty"`
}

// PrincipalMatch holds the criteria on the caller.
type PrincipalMatch struct {
	Sub       Values             `json:"sub,omitempty"`
	ActorType Values             `json:"actor_type,omitempty"`
	ClientID  Values             `json:"client_id,omitempty"`
	OrgID     Values             `json:"org_id,omitempty"`
	Issuer    Values             `json:"issuer,omitempty"`
	Claims    map[string]Scalars `json:"claims,omitempty"`
}

// Policy is a parsed, compiled policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	// ID is the file's policy_id.
	ID string
	// Version is "sha256:<hex>" of the canonical policy (the parsed file
	// re-encoded as compact JSON with sorted keys, $schema left out): the
	// same rules give the same version whatever the formatting.
	Version  string
	file     File
	rules    []*compiledRule // sorted: priority desc, then file order
	accesses []*compiledAccess
}

// File returns a copy of the parsed file.
func (p *Policy) File() File {
	f := p.file
	f.Rules = slices.Clone(f.Rules)
	f.Access = slices.Clone(f.Access)
	return f
}

type compiledRule struct {
	Rule
	action, kind, class, risk, trust map[string]bool
	maxRisk, minTrust                int // -1: no criterion
	server, namespace, toolID        globSet
	principal                        *compiledPrincipal
	decision                         Decision
}

type compiledPrincipal struct {
	sub, actorType, clientID, orgID, issuer globSet
	claims                                  []claimMatch
}

type claimMatch struct {
	name   string
	values map[string]bool // canonical scalars
}

// compiledSchema is the embedded policy schema, compiled once; it is
// never modified after.
var compiledSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	const url = "https://quiver-mcp.dev/schemas/policy.schema.json"
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.Policy))
	if err != nil {
		return nil, fmt.Errorf("policy schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, d); err != nil {
		return nil, fmt.Errorf("policy schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("policy schema: %w", err)
	}
	return s, nil
})

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	data, err := readCapped(path)
	if err != nil {
		return nil, &ParseError{File: path, Msg: oneLine(err.Error()), Err: err}
	}
	return Parse(path, data)
}

// readCapped reads a file of at most MaxFileSize bytes.
func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileSize)
	}
	return data, nil
}

// Parse parses a policy held in data (YAML or JSON); name is used in
// errors. The document is validated against schemas/policy.schema.json
// (unknown keys are errors), then rule ids must be unique and globs
// valid. Parse never panics; every error matches ErrInvalidPolicy.
func Parse(name string, data []byte) (*Policy, error) {
	if len(data) > MaxFileSize {
		return nil, &ParseError{File: name, Msg: fmt.Sprintf("larger than %d bytes", MaxFileSize)}
	}
	d, err := decodeYAML(data)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.File = name
			return nil, pe
		}
		return nil, &ParseError{File: name, Msg: oneLine(err.Error()), Err: err}
	}
	sch, err := compiledSchema()
	if err != nil {
		return nil, &ParseError{File: name, Msg: err.Error(), Err: err}
	}
	if verr := sch.Validate(d.value); verr != nil {
		return nil, schemaError(name, d, verr)
	}
	raw, err := json.Marshal(d.value)
	if err != nil {
		return nil, &ParseError{File: name, Msg: oneLine(err.Error()), Err: err}
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, &ParseError{File: name, Msg: oneLine(err.Error()), Err: err}
	}
	return compile(name, d, f)
}

// schemaError reports the first (deepest, earliest) schema violation.
func schemaError(name string, d *doc, verr error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return &ParseError{File: name, Msg: oneLine(verr.Error()), Err: verr}
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		// Prefer the cause reported first in the file.
		best := leaf.Causes[0]
		for _, c := range leaf.Causes[1:] {
			if d.line(pointer(c.InstanceLocation)) < d.line(pointer(best.InstanceLocation)) {
				best = c
			}
		}
		leaf = best
	}
	ptr := pointer(leaf.InstanceLocation)
	msg := leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	if ap, ok := leaf.ErrorKind.(*kind.AdditionalProperties); ok && len(ap.Properties) > 0 {
		ptr += "/" + jsonpointer.Escape(ap.Properties[0])
		msg = fmt.Sprintf("unknown key %q", ap.Properties[0])
	}
	return &ParseError{File: name, Line: d.line(ptr), Field: ptr, Msg: oneLine(msg), Err: verr}
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + jsonpointer.Escape(t))
	}
	return b.String()
}

// compile checks what the schema cannot and builds the rule table.
func compile(name string, d *doc, f File) (*Policy, error) {
	fail := func(ptr, format string, args ...any) error {
		return &ParseError{File: name, Line: d.line(ptr), Field: ptr, Msg: fmt.Sprintf(format, args...)}
	}
	canon := f
	canon.Schema = ""
	canonical, err := json.Marshal(canon)
	if err != nil {
		return nil, &ParseError{File: name, Msg: oneLine(err.Error()), Err: err}
	}
	sum := sha256.Sum256(canonical)
	p := &Policy{ID: f.PolicyID, Version: "sha256:" + hex.EncodeToString(sum[:]), file: f}
	seen := map[string]int{}
	for i, r := range f.Rules {
		ptr := "/rules/" + strconv.Itoa(i)
		if j, dup := seen[r.ID]; dup {
			return nil, fail(ptr+"/id", "rule id %q is used by rules[%d] too", r.ID, j)
		}
		seen[r.ID] = i
		cr, err := compileRule(r, p)
		if err != nil {
			return nil, fail(ptr+"/match", "%v", err)
		}
		p.rules = append(p.rules, cr)
	}
	sort.SliceStable(p.rules, func(i, j int) bool { return p.rules[i].Priority > p.rules[j].Priority })
	for i, a := range f.Access {
		ptr := "/access/" + strconv.Itoa(i)
		if j, dup := seen["access:"+a.ID]; dup {
			return nil, fail(ptr+"/id", "access id %q is used by access[%d] too", a.ID, j)
		}
		seen["access:"+a.ID] = i
		ca, err := compileAccess(a)
		if err != nil {
			return nil, fail(ptr, "%v", err)
		}
		p.accesses = append(p.accesses, ca)
	}
	return p, nil
}

func set(vals []string) map[string]bool {
	if len(vals) == 0 {
		return nil
	}
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}

func compileRule(r Rule, p *Policy) (*compiledRule, error) {
	m := r.Match
	cr := &compiledRule{Rule: r, action: set(m.Action), kind: set(m.Kind), class: set(m.ToolClass),
		risk: set(m.Risk), trust: set(m.TrustLevel), maxRisk: -1, minTrust: -1}
	if m.MaxRisk != "" {
		cr.maxRisk = riskRank(m.MaxRisk)
	}
	if m.MinTrust != "" {
		cr.minTrust = trustRank(m.MinTrust)
	}
	var err error
	if cr.server, err = compileGlobs("server", m.Server); err != nil {
		return nil, err
	}
	if cr.namespace, err = compileGlobs("namespace", m.Namespace); err != nil {
		return nil, err
	}
	if cr.toolID, err = compileGlobs("tool_id", m.ToolID); err != nil {
		return nil, err
	}
	if pm := m.Principal; pm != nil {
		cp := &compiledPrincipal{}
		for _, g := range []struct {
			field string
			vals  Values
			dst   *globSet
		}{{"principal.sub", pm.Sub, &cp.sub}, {"principal.actor_type", pm.ActorType, &cp.actorType},
			{"principal.client_id", pm.ClientID, &cp.clientID}, {"principal.org_id", pm.OrgID, &cp.orgID},
			{"principal.issuer", pm.Issuer, &cp.issuer}} {
			if *g.dst, err = compileGlobs(g.field, g.vals); err != nil {
				return nil, err
			}
		}
		names := make([]string, 0, len(pm.Claims))
		for k := range pm.Claims {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			cm := claimMatch{name: k, values: map[string]bool{}}
			for _, v := range pm.Claims[k] {
				c, ok := canonScalar(v)
				if !ok {
					return nil, fmt.Errorf("principal.claims.%s: values must be strings, numbers or booleans", k)
				}
				cm.values[c] = true
			}
			cp.claims = append(cp.claims, cm)
		}
		cr.principal = cp
	}
	cr.decision = Decision{Effect: r.Effect, PolicyID: p.ID, RuleID: r.ID}
	switch r.Effect {
	case EffectAllow:
		cr.decision.ReasonCodes = append([]string{ReasonAllowed}, r.ReasonCodes...)
	case EffectRequireApproval:
		cr.decision.ReasonCodes = append([]string{ReasonApprovalRequired}, r.ReasonCodes...)
	default:
		cr.decision.ReasonCodes = append([]string{ReasonDenied}, r.ReasonCodes...)
	}
	return cr, nil
}

// riskRank orders risks LOW < MEDIUM < HIGH < CRITICAL; an unknown risk
// ranks as CRITICAL.
func riskRank(r string) int {
	switch strings.ToUpper(r) {
	case "LOW":
		return 0
	case "MEDIUM":
		return 1
	case "HIGH":
		return 2
	}
	return 3
}

// trustRank orders trust levels unknown < community < verified <
// internal; an unknown level ranks as unknown.
func trustRank(t string) int {
	switch strings.ToLower(t) {
	case "community":
		return 1
	case "verified":
		return 2
	case "internal":
		return 3
	}
	return 0
}

// riskName normalizes a risk; an unknown one is CRITICAL.
func riskName(r string) string {
	return [...]string{"LOW", "MEDIUM", "HIGH", "CRITICAL"}[riskRank(r)]
}

// trustName normalizes a trust level; an unknown one is unknown.
func trustName(t string) string {
	return [...]string{"unknown", "community", "verified", "internal"}[trustRank(t)]
}

// canonScalar renders a claim value for comparison: strings, numbers (by
// value, so 3 and 3.0 agree) and booleans; anything else cannot match.
func canonScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return "s:" + x, true
	case bool:
		return "b:" + strconv.FormatBool(x), true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return "", false
		}
		return canonFloat(f), true
	case float64:
		return canonFloat(x), true
	case int:
		return canonFloat(float64(x)), true
	case int64:
		return canonFloat(float64(x)), true
	}
	return "", false
}

func canonFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "n:?"
	}
	return "n:" + strconv.FormatFloat(f, 'g', -1, 64)
}

// Decide answers req: the first rule (by priority, then file order) whose
// match holds decides; when none does, deny with POLICY_DENIED and
// NO_MATCHING_RULE. A nil policy denies everything (NO_POLICY), and an
// action other than list, call, sample and elicit is denied with
// INVALID_REQUEST. There is no approval flow for sample and elicit: a
// require_approval rule that matches one decides deny, with reason codes
// POLICY_DENIED, APPROVAL_REQUIRED and the rule's own codes.
func (p *Policy) Decide(req Request) Decision {
	if p == nil {
		return Decision{Effect: EffectDeny, ReasonCodes: []string{ReasonDenied, ReasonNoPolicy}}
	}
	if req.Kind == "" {
		req.Kind = "tool"
	}
	if !validAction(req.Action) {
		return Decision{Effect: EffectDeny, PolicyID: p.ID, PolicyVersion: p.Version, ReasonCodes: []string{ReasonDenied, ReasonInvalidRequest}}
	}
	for _, r := range p.rules {
		if r.matches(&req) {
			d := r.decision
			d.PolicyVersion = p.Version
			if d.Effect == EffectRequireApproval && ServerToClient(req.Action) {
				d.Effect = EffectDeny
				d.ReasonCodes = append([]string{ReasonDenied}, d.ReasonCodes...)
				return d
			}
			d.ReasonCodes = slices.Clone(d.ReasonCodes)
			return p.access(&req, d)
		}
	}
	return Decision{Effect: EffectDeny, PolicyID: p.ID, PolicyVersion: p.Version, ReasonCodes: []string{ReasonDenied, ReasonNoMatchingRule}}
}

func (r *compiledRule) matches(req *Request) bool {
	if r.action != nil && !r.action[req.Action] {
		return false
	}
	if r.kind != nil && !r.kind[req.Kind] {
		return false
	}
	if r.class != nil && !r.class[req.ToolClass] {
		return false
	}
	if r.risk != nil && !r.risk[riskName(req.Risk)] {
		return false
	}
	if r.maxRisk >= 0 && riskRank(req.Risk) > r.maxRisk {
		return false
	}
	if r.trust != nil && !r.trust[trustName(req.TrustLevel)] {
		return false
	}
	if r.minTrust >= 0 && trustRank(req.TrustLevel) < r.minTrust {
		return false
	}
	if r.server != nil && !r.server.match(req.Server) {
		return false
	}
	if r.namespace != nil && !r.namespace.match(req.Namespace) {
		return false
	}
	if r.toolID != nil && !r.toolID.match(req.ToolID) {
		return false
	}
	return r.principal == nil || r.principal.matches(req.Principal)
}

func (cp *compiledPrincipal) matches(p identity.Principal) bool {
	if p.IsZero() {
		// Criteria on the caller never hold for no one.
		return false
	}
	for _, c := range []struct {
		g globSet
		v string
	}{{cp.sub, p.Sub}, {cp.actorType, p.ActorType}, {cp.clientID, p.ClientID}, {cp.orgID, p.OrgID}, {cp.issuer, p.Issuer}} {
		if c.g != nil && !c.g.match(c.v) {
			return false
		}
	}
	for _, cm := range cp.claims {
		v, ok := claimValue(p.Claims, cm.name)
		if !ok || !cm.holds(v) {
			return false
		}
	}
	return true
}

// claimValue finds a claim by name, or by a dotted path into nested
// objects when no claim has the whole name.
func claimValue(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// holds reports whether a claim value is one of the wanted values; an
// array claim holds when any element does.
func (cm claimMatch) holds(v any) bool {
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if c, ok := canonScalar(x); ok && cm.values[c] {
				return true
			}
		}
		return false
	}
	if l, ok := v.([]string); ok {
		for _, x := range l {
			if cm.values["s:"+x] {
				return true
			}
		}
		return false
	}
	c, ok := canonScalar(v)
	return ok && cm.values[c]
}
