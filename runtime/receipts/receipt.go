// Package receipts records one structured receipt per gateway decision
// (spec 001 MUST 9) and reads them back.
//
// A [Receipt] carries the fields of spec 001's receipt schema, with the
// spec's own names (mcp.server_id, mcp.tool_name, request.size_bytes_in,
// decision.result, approval.approved_by, outcome.size_bytes_out), plus
// quiver's (mcp.tool_id, mcp.session_id, approval.approval_id,
// outcome.error_code, outcome.duration_ms). schemas/receipt.schema.json
// is its JSON Schema. Raw arguments never appear in a receipt: [ArgsHash]
// is the sha256 of their canonical JSON.
//
// A [Writer] appends receipts to daily JSONL files
// (receipts-YYYY-MM-DD.jsonl, UTC) from a bounded queue, in fsync'd
// batches, without ever blocking or failing the call that emits them. A
// [Reader] iterates, filters and follows those files for `quiver receipts
// query|tail`.
package receipts

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
)

// Version is the receipt_version this package writes.
const Version = 1

// Field limits enforced before a receipt is written (the schema's).
const (
	maxText    = 1024
	maxMessage = 512
	maxCodes   = 32
	maxCode    = 128
)

// Outcome statuses (spec 001).
const (
	StatusSuccess = "success"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// Token handling modes (spec 001 MUST 5).
const (
	TokenExchanged = "exchanged"
	TokenVault     = "vault"
	TokenBlocked   = "blocked"
	TokenNone      = "none"
)

// Receipt is one gateway decision. Build it with [New], fill in what the
// call knows, and hand it to [Writer.Emit]; Emit completes and bounds
// every field so the written line validates against
// schemas/receipt.schema.json.
type Receipt struct {
	ReceiptVersion int           `json:"receipt_version"`
	TS             time.Time     `json:"ts"`
	ReceiptID      string        `json:"receipt_id"`
	TraceID        string        `json:"trace_id"`
	Principal      Principal     `json:"principal"`
	MCP            MCP           `json:"mcp"`
	Request        Request       `json:"request"`
	Decision       Decision      `json:"decision"`
	TokenHandling  TokenHandling `json:"token_handling"`
	Sandbox        Sandbox       `json:"sandbox"`
	Approval       Approval      `json:"approval"`
	Outcome        Outcome       `json:"outcome"`
	IncidentMode   bool          `json:"incident_mode"`
	// Tool is what quiver knew and did of a tool call: nil for other
	// requests.
	Tool *Tool `json:"tool,omitempty"`
	// Capability is set on requests that involved a capability token or a
	// restricted principal's request (spec 004).
	Capability *Capability `json:"capability,omitempty"`
}

// Denial stages of a tool call (spec 002 §1.9): where the pipeline
// stopped it.
const (
	StageRegistry   = "registry"
	StageValidation = "validation"
	StagePermission = "permission"
	StagePolicy     = "policy"
	StageExecution  = "execution"
	StageOutput     = "output"
)

// Tool records a tool call's classification and what its output became
// (spec 002 §1.9; spec 000 §9.2.2 rule 5). It never carries argument or
// result values: hashes and field paths only.
type Tool struct {
	// Class is read, write, destructive or unclassified.
	Class string `json:"tool_class"`
	// DenialStage is where a call that did not succeed stopped: registry,
	// validation, permission, policy, execution or output ("" when it
	// succeeded).
	DenialStage string `json:"denial_stage,omitempty"`
	// OutputSHA256 is the hex sha256 of the tool's raw result (its JSON,
	// before the output policy), "" when there was none.
	OutputSHA256 string `json:"output_sha256,omitempty"`
	// RedactedPaths are the field paths the output policy removed or
	// masked.
	RedactedPaths []string `json:"redacted_paths,omitempty"`
	// DocumentHashes are the documents written and read, as
	// "pointer=sha256:<hex>".
	DocumentHashes []string `json:"document_hashes,omitempty"`
	// BatchTotalBytes is the total size of those documents.
	BatchTotalBytes int64 `json:"batch_total_bytes,omitempty"`
}

// Capability is what a receipt records of a capability token: its ids and
// the holder key's thumbprint, never the token text.
type Capability struct {
	// Action is grant, pending, refuse, use, attenuate, revoke, request or
	// fulfil.
	Action string `json:"action"`
	// JTI is the token's id, Parent the token it was attenuated from, JKT
	// the RFC 7638 thumbprint of the holder key, KID the signing key.
	JTI    string `json:"jti,omitempty"`
	Parent string `json:"parent,omitempty"`
	JKT    string `json:"jkt,omitempty"`
	KID    string `json:"kid,omitempty"`
	// Reason is the stable reason of a refusal (data.reason).
	Reason string `json:"reason,omitempty"`
	// RequestID, OnBehalfOf and FulfilledBy describe a restricted
	// principal's call fulfilled by a full one.
	RequestID   string `json:"request_id,omitempty"`
	OnBehalfOf  string `json:"on_behalf_of,omitempty"`
	FulfilledBy string `json:"fulfilled_by,omitempty"`
}

// Principal is who made the request; Sub is "" and ActorType "unknown"
// when the caller did not authenticate.
type Principal struct {
	Sub       string `json:"sub"`
	ActorType string `json:"actor_type"`
	ClientID  string `json:"client_id"`
	OrgID     string `json:"org_id"`
	Issuer    string `json:"issuer,omitempty"`
}

// MCP is what was asked of the gateway.
type MCP struct {
	// Method is the MCP method ("tools/call", "tools/list",
	// "resources/read", ...); for a meta-tool, "tools/call:<meta-tool>"
	// (e.g. "tools/call:tool_execute"); "http" for a request refused
	// before MCP routing; "admin/..." for an operator action.
	Method     string `json:"method"`
	ServerID   string `json:"server_id"`
	ToolName   string `json:"tool_name"`
	ToolID     string `json:"tool_id"`
	TrustLevel string `json:"trust_level"`
	SessionID  string `json:"session_id"`
}

// Request describes the arguments without carrying them.
type Request struct {
	// ArgsHash is the hex sha256 of the canonical arguments ("" when
	// there are none).
	ArgsHash    string `json:"args_hash"`
	SizeBytesIn int64  `json:"size_bytes_in"`
}

// Decision is the policy's answer (or the incident state's, or the
// authenticator's).
type Decision struct {
	// Result is allow, deny or require_approval.
	Result        string   `json:"result"`
	PolicyID      string   `json:"policy_id"`
	PolicyVersion string   `json:"policy_version,omitempty"`
	RuleID        string   `json:"rule_id,omitempty"`
	ReasonCodes   []string `json:"reason_codes"`
}

// TokenHandling says what happened to credentials (spec 001 MUST 5).
type TokenHandling struct {
	// Mode is exchanged, vault, blocked or none.
	Mode     string `json:"mode"`
	Audience string `json:"audience,omitempty"`
	// PassthroughDetected is true only if a client token was seen on its
	// way upstream; it must always be false.
	PassthroughDetected bool `json:"passthrough_detected"`
}

// Sandbox is the isolation the call's upstream runs under: spec 001's
// fs_policy (workspace_only, read_only or none) and net_policy
// (allowlist, block_all or none), and quiver's mode (bwrap, off or none;
// "" when the call reached no command upstream) and detail (the binds and
// network, or the reason the sandbox is off).
type Sandbox struct {
	FSPolicy  string `json:"fs_policy"`
	NetPolicy string `json:"net_policy"`
	Mode      string `json:"mode,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Approval records an operator approval.
type Approval struct {
	Required   bool   `json:"required"`
	ApprovalID string `json:"approval_id"`
	// ApprovedBy is the operator who granted it ("" when not granted).
	ApprovedBy string `json:"approved_by"`
	// ApprovedAt is RFC 3339 UTC, "" when not granted.
	ApprovedAt string `json:"approved_at,omitempty"`
	// StepUp is mfa or none.
	StepUp string `json:"step_up"`
}

// Outcome is how the request ended.
type Outcome struct {
	// Status is success, error or timeout.
	Status string `json:"status"`
	// ErrorCode is the wire error code (POLICY_DENIED, ARGS_INVALID,
	// UPSTREAM_TIMEOUT, ...), "" on success.
	ErrorCode    string  `json:"error_code"`
	DurationMS   float64 `json:"duration_ms"`
	SizeBytesOut int64   `json:"size_bytes_out"`
	// Message is an optional human line; Emit redacts secrets from it and
	// caps it.
	Message string `json:"message,omitempty"`
}

// New returns a receipt for method with a fresh id and trace id, the
// current time, and every enum at its "nothing happened" value: principal
// unknown, trust unknown, token handling none (no passthrough), sandbox
// none, no approval, decision deny and outcome error until the caller says
// otherwise (an unfinished receipt never reads as an allowed success).
func New(method string, now time.Time) Receipt {
	return Receipt{
		ReceiptVersion: Version,
		TS:             now.UTC(),
		ReceiptID:      NewID(),
		TraceID:        NewTraceID(),
		Principal:      Principal{ActorType: "unknown"},
		MCP:            MCP{Method: method, TrustLevel: "unknown"},
		Decision:       Decision{Result: string(policy.EffectDeny), ReasonCodes: []string{}},
		TokenHandling:  TokenHandling{Mode: TokenNone},
		Sandbox:        Sandbox{FSPolicy: "none", NetPolicy: "none"},
		Approval:       Approval{StepUp: "none"},
		Outcome:        Outcome{Status: StatusError},
	}
}

// PrincipalOf converts an identity principal.
func PrincipalOf(p identity.Principal) Principal {
	if p.IsZero() {
		return Principal{ActorType: "unknown"}
	}
	return Principal{Sub: p.Sub, ActorType: p.ActorType, ClientID: p.ClientID, OrgID: p.OrgID, Issuer: p.Issuer}
}

// DecisionOf converts a policy decision.
func DecisionOf(d policy.Decision) Decision {
	return Decision{Result: string(d.Effect), PolicyID: d.PolicyID, PolicyVersion: d.PolicyVersion, RuleID: d.RuleID,
		ReasonCodes: append([]string{}, d.ReasonCodes...)}
}

// NewID returns a UUIDv7 (time-ordered) receipt id.
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does, which
		// crypto/rand treats as fatal anyway.
		panic(fmt.Sprintf("receipts: uuid: %v", err))
	}
	return id.String()
}

// NewTraceID returns a random W3C trace id (32 lower-case hex digits).
func NewTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ErrArgs is returned by ArgsHash for arguments that are not JSON.
var ErrArgs = errors.New("arguments are not valid JSON")

// ArgsHash returns the hex sha256 of the canonical form of raw JSON
// arguments, and the size of raw. The canonical form is the value
// re-encoded compactly with object keys sorted, numbers as written and no
// HTML escaping; so {"b":1, "a":2} and {"a":2,"b":1} hash alike. Empty
// (or null) arguments hash as {}.
func ArgsHash(raw []byte) (string, int64, error) {
	size := int64(len(raw))
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", size, fmt.Errorf("%w: %w", ErrArgs, err)
	}
	if dec.More() {
		return "", size, fmt.Errorf("%w: trailing data", ErrArgs)
	}
	h, err := HashValue(v)
	return h, size, err
}

// HashValue is ArgsHash for an already decoded value (maps, slices,
// strings, json.Number or float64, bools, nil).
func HashValue(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("%w: %w", ErrArgs, err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}

// normalize completes and bounds r so that it validates against the
// schema: missing ids and timestamps are filled, unknown enum values
// become their "unknown"/"none" value, text is capped, and the message is
// redacted.
func (r *Receipt) normalize(now time.Time) {
	r.ReceiptVersion = Version
	if r.TS.IsZero() {
		r.TS = now
	}
	r.TS = r.TS.UTC()
	if _, err := uuid.Parse(r.ReceiptID); err != nil || !isV7(r.ReceiptID) {
		r.ReceiptID = NewID()
	}
	if !isHex(r.TraceID, 32) {
		r.TraceID = NewTraceID()
	}
	p := &r.Principal
	p.Sub, p.ClientID, p.OrgID, p.Issuer = capText(p.Sub), capText(p.ClientID), capText(p.OrgID), capText(p.Issuer)
	p.ActorType = oneOf(p.ActorType, "unknown", "user", "agent", "system")
	m := &r.MCP
	if m.Method == "" {
		m.Method = "unknown"
	}
	m.Method = capLen(m.Method, 128)
	m.ServerID, m.ToolName, m.ToolID, m.SessionID = capText(m.ServerID), capText(m.ToolName), capText(m.ToolID), capText(m.SessionID)
	m.TrustLevel = oneOf(m.TrustLevel, "unknown", "internal", "verified", "community")
	if !isHex(r.Request.ArgsHash, 64) {
		r.Request.ArgsHash = ""
	}
	r.Request.SizeBytesIn = max(r.Request.SizeBytesIn, 0)
	d := &r.Decision
	d.Result = oneOf(d.Result, string(policy.EffectDeny), string(policy.EffectAllow), string(policy.EffectRequireApproval))
	d.PolicyID, d.PolicyVersion, d.RuleID = capText(d.PolicyID), capText(d.PolicyVersion), capText(d.RuleID)
	codes := make([]string, 0, len(d.ReasonCodes))
	for _, c := range d.ReasonCodes {
		if c = codeSafe(c); c != "" && len(codes) < maxCodes {
			codes = append(codes, c)
		}
	}
	d.ReasonCodes = codes
	r.TokenHandling.Mode = oneOf(r.TokenHandling.Mode, TokenNone, TokenExchanged, TokenVault, TokenBlocked)
	r.TokenHandling.Audience = capText(r.TokenHandling.Audience)
	r.Sandbox.FSPolicy = oneOf(r.Sandbox.FSPolicy, "none", "workspace_only", "read_only")
	r.Sandbox.NetPolicy = oneOf(r.Sandbox.NetPolicy, "none", "allowlist", "block_all")
	r.Sandbox.Mode = oneOf(r.Sandbox.Mode, "", "bwrap", "off", "none")
	r.Sandbox.Detail = capText(oneLineText(r.Sandbox.Detail))
	a := &r.Approval
	a.ApprovalID, a.ApprovedBy, a.ApprovedAt = capText(a.ApprovalID), capText(a.ApprovedBy), capLen(a.ApprovedAt, 40)
	a.StepUp = oneOf(a.StepUp, "none", "mfa")
	o := &r.Outcome
	o.Status = oneOf(o.Status, StatusError, StatusSuccess, StatusTimeout)
	o.ErrorCode = capLen(o.ErrorCode, 64)
	if o.DurationMS < 0 || o.DurationMS != o.DurationMS {
		o.DurationMS = 0
	}
	o.SizeBytesOut = max(o.SizeBytesOut, 0)
	if o.Message != "" {
		o.Message = capLen(oneLineText(Redact(o.Message)), maxMessage)
	}
	if t := r.Tool; t != nil {
		t.Class = oneOf(t.Class, "unclassified", "read", "write", "destructive")
		t.DenialStage = oneOf(t.DenialStage, "", StageRegistry, StageValidation, StagePermission, StagePolicy, StageExecution, StageOutput)
		if !isHex(t.OutputSHA256, 64) {
			t.OutputSHA256 = ""
		}
		t.RedactedPaths = capList(t.RedactedPaths)
		t.DocumentHashes = capList(t.DocumentHashes)
		t.BatchTotalBytes = max(t.BatchTotalBytes, 0)
	}
}

// maxListed bounds the lists of a receipt's tool section.
const maxListed = 128

// capList bounds a list and each of its entries.
func capList(l []string) []string {
	if len(l) > maxListed {
		l = l[:maxListed]
	}
	out := make([]string, 0, len(l))
	for _, s := range l {
		out = append(out, capLen(oneLineText(s), 512))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func oneOf(v, def string, allowed ...string) string {
	if v == def {
		return v
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	return def
}

func capText(s string) string { return capLen(s, maxText) }

// capLen cuts s to at most n bytes, on a rune boundary, so also to at
// most n characters (what the schema's maxLength counts).
func capLen(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// codeSafe keeps a reason code within ^[A-Za-z0-9_.:-]{1,128}$.
func codeSafe(c string) string {
	c = strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '.', r == ':', r == '-':
			return r
		}
		return '_'
	}, c)
	return capLen(c, maxCode)
}

// oneLineText replaces control characters with spaces.
func oneLineText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < n; i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isV7 reports whether s is a canonical lower-case UUIDv7 string.
func isV7(s string) bool {
	if len(s) != 36 || s[14] != '7' || strings.ToLower(s) != s {
		return false
	}
	switch s[19] {
	case '8', '9', 'a', 'b':
		return true
	}
	return false
}
