package capability

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Reasons of a refusal (data.reason on the wire), in the order the
// Validator checks them. They are stable: clients branch on them.
const (
	ReasonMissing          = "capability_missing"
	ReasonProofMissing     = "proof_missing"
	ReasonMalformed        = "token_malformed"
	ReasonUnknownKey       = "unknown_key"
	ReasonSignatureInvalid = "signature_invalid"
	ReasonNotYetValid      = "not_yet_valid"
	ReasonExpired          = "expired"
	ReasonHolderMismatch   = "holder_mismatch"
	ReasonProofKeyMismatch = "proof_key_mismatch"
	ReasonProofInvalid     = "proof_invalid"
	ReasonProofStale       = "proof_stale"
	ReasonProofReplayed    = "proof_replayed"
	ReasonProofMismatch    = "proof_mismatch"
	ReasonSessionMismatch  = "session_mismatch"
	ReasonToolNotGranted   = "tool_not_granted"
	ReasonArgsConstraint   = "args_constraint"
	ReasonUsesExhausted    = "uses_exhausted"
	ReasonRevoked          = "revoked"
)

// Refusal is the Validator's refusal of a presented capability: a stable
// reason and one line. JTI and JKT name the token when it was readable
// (for receipts; never the token text).
type Refusal struct {
	Reason string
	Msg    string
	JTI    string
	JKT    string
}

func (r *Refusal) Error() string { return "capability refused: " + r.Reason + ": " + r.Msg }

// DefaultProofWindow is how far a proof's iat may be from the gateway's
// clock.
const DefaultProofWindow = 60 * time.Second

// Presented is one call's capability as the caller presented it, and what
// the call is.
type Presented struct {
	Token, Proof string
	// Holder is the caller's principal key.
	Holder string
	// ToolID is the tool called; Args its raw arguments.
	ToolID string
	Args   json.RawMessage
	// Session is the caller's MCP session id ("" when sessionless).
	Session string
}

// Validator checks presented capabilities. Safe for concurrent use.
type Validator struct {
	keys   *Keyring
	store  *Store
	issuer string
	window time.Duration
	now    func() time.Time
	// verified caches the claims of tokens whose signature verified, by
	// the token's sha256: a token is presented many times, its proof once.
	verified *lru.Cache[[32]byte, *Claims]
	schemas  *lru.Cache[[32]byte, *jsonschema.Schema]
}

// ValidatorOptions configure a Validator.
type ValidatorOptions struct {
	Keys  *Keyring
	Store *Store
	// Issuer is the iss a token must carry.
	Issuer string
	// Window bounds |now - proof iat| (default DefaultProofWindow).
	Window time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// NewValidator builds a Validator.
func NewValidator(o ValidatorOptions) (*Validator, error) {
	if o.Keys == nil || o.Store == nil {
		return nil, errors.New("capability: a validator needs keys and a store")
	}
	if o.Window <= 0 {
		o.Window = DefaultProofWindow
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	verified, err := lru.New[[32]byte, *Claims](4096)
	if err != nil {
		return nil, err
	}
	schemas, err := lru.New[[32]byte, *jsonschema.Schema](1024)
	if err != nil {
		return nil, err
	}
	return &Validator{keys: o.Keys, store: o.Store, issuer: o.Issuer, window: o.Window, now: o.Now, verified: verified, schemas: schemas}, nil
}

// Verify checks a token's signature, issuer and validity period only:
// for attenuation, where the holder asks the gateway about its own token.
func (v *Validator) Verify(token string) (*Claims, *Refusal) {
	c, r := v.token(token)
	if r != nil {
		return nil, r
	}
	if r := v.period(c); r != nil {
		return nil, r
	}
	return c, nil
}

func (v *Validator) token(token string) (*Claims, *Refusal) {
	if token == "" {
		return nil, &Refusal{Reason: ReasonMissing, Msg: "no capability token was presented"}
	}
	sum := sha256.Sum256([]byte(token))
	if c, ok := v.verified.Get(sum); ok {
		// The key that signed it may have been retired since.
		if _, known := v.keys.lookup(c.kid); known {
			return c, nil
		}
		v.verified.Remove(sum)
	}
	c, reason, err := parseToken(v.keys, token)
	if err != nil {
		return nil, &Refusal{Reason: reason, Msg: err.Error()}
	}
	if c.Issuer != v.issuer {
		return nil, &Refusal{Reason: ReasonUnknownKey, Msg: "the token was issued by another gateway", JTI: c.ID, JKT: c.Cnf.JKT}
	}
	v.verified.Add(sum, c)
	return c, nil
}

func (v *Validator) period(c *Claims) *Refusal {
	now := v.now()
	switch {
	case now.Before(c.NotBefore.Time):
		return &Refusal{Reason: ReasonNotYetValid, Msg: "the token is not valid yet", JTI: c.ID, JKT: c.Cnf.JKT}
	case !now.Before(c.ExpiresAt.Time):
		return &Refusal{Reason: ReasonExpired, Msg: "the token has expired", JTI: c.ID, JKT: c.Cnf.JKT}
	}
	return nil
}

// Validate checks a presented capability for one call, in this order:
// the token's signature and kid, nbf and exp, the holder against the
// caller, the proof's signature against cnf.jkt and what it covers (tool,
// arguments, session), the proof's iat within the window and its jti never
// seen (the replay cache), the tool among the token's tools, the argument
// constraints, max_uses (an atomic counter shared by every replica), and
// the revocation list (the token, its ancestors, its holder, its key). It
// returns the token's claims, a *Refusal, or an error of the store (which
// the caller must treat as a refusal too: fail closed).
func (v *Validator) Validate(ctx context.Context, p Presented) (*Claims, error) {
	c, err := v.possession(ctx, p)
	if err != nil {
		return c, err
	}
	refuse := func(reason, format string, args ...any) (*Claims, error) {
		return c, &Refusal{Reason: reason, Msg: fmt.Sprintf(format, args...), JTI: c.ID, JKT: c.Cnf.JKT}
	}
	if !c.Grants(p.ToolID) {
		return refuse(ReasonToolNotGranted, "the token does not grant this tool")
	}
	if frag, ok := c.Args[p.ToolID]; ok {
		if msg := v.constrain(frag, p.Args); msg != "" {
			return refuse(ReasonArgsConstraint, "%s", msg)
		}
	}
	if c.MaxUses > 0 {
		ok, err := v.store.use(ctx, c, 1, v.now())
		if err != nil {
			return c, err
		}
		if !ok {
			return refuse(ReasonUsesExhausted, "the token's %d uses are spent", c.MaxUses)
		}
	}
	return v.revoked(ctx, c)
}

// Possess checks that the caller holds a token, for a request about the
// token itself (an attenuation): the token, its validity, the holder, a
// proof for p.ToolID and p.Args that was never seen, and the revocation
// list. No use is counted.
func (v *Validator) Possess(ctx context.Context, p Presented) (*Claims, error) {
	c, err := v.possession(ctx, p)
	if err != nil {
		return c, err
	}
	return v.revoked(ctx, c)
}

// Check is Validate without using the token, for a dry run: the token,
// its validity, the holder, the tool, the argument constraints and the
// revocation list; the proof is not consumed and no use is counted.
func (v *Validator) Check(ctx context.Context, p Presented) (*Claims, error) {
	c, r := v.token(p.Token)
	if r != nil {
		return nil, r
	}
	refuse := func(reason, format string, args ...any) (*Claims, error) {
		return c, &Refusal{Reason: reason, Msg: fmt.Sprintf(format, args...), JTI: c.ID, JKT: c.Cnf.JKT}
	}
	if r := v.period(c); r != nil {
		return c, r
	}
	if p.Holder == "" || p.Holder != c.Subject {
		return refuse(ReasonHolderMismatch, "the token belongs to another principal")
	}
	if !c.Grants(p.ToolID) {
		return refuse(ReasonToolNotGranted, "the token does not grant this tool")
	}
	if frag, ok := c.Args[p.ToolID]; ok {
		if msg := v.constrain(frag, p.Args); msg != "" {
			return refuse(ReasonArgsConstraint, "%s", msg)
		}
	}
	return v.revoked(ctx, c)
}

// possession runs the checks up to the replay cache.
func (v *Validator) possession(ctx context.Context, p Presented) (*Claims, error) {
	c, r := v.token(p.Token)
	if r != nil {
		return nil, r
	}
	refuse := func(reason, format string, args ...any) (*Claims, error) {
		return c, &Refusal{Reason: reason, Msg: fmt.Sprintf(format, args...), JTI: c.ID, JKT: c.Cnf.JKT}
	}
	if r := v.period(c); r != nil {
		return c, r
	}
	if p.Holder == "" || p.Holder != c.Subject {
		return refuse(ReasonHolderMismatch, "the token belongs to another principal")
	}
	if p.Proof == "" {
		return refuse(ReasonProofMissing, "no proof of possession was presented")
	}
	pc, reason, err := parseProof(p.Proof, c.Cnf.JKT)
	if err != nil {
		return refuse(reason, "%v", err)
	}
	h, err := ArgsSHA256(p.Args)
	if err != nil {
		return refuse(ReasonProofMismatch, "the arguments are not a JSON object")
	}
	switch {
	case pc.ToolID != p.ToolID:
		return refuse(ReasonProofMismatch, "the proof is for another tool")
	case pc.ArgsSHA256 != h:
		return refuse(ReasonProofMismatch, "the proof is for other arguments")
	case c.Session != "" && (pc.Session != c.Session || p.Session != c.Session):
		return refuse(ReasonSessionMismatch, "the token is bound to another session")
	}
	if d := v.now().Sub(pc.IssuedAt.Time); d > v.window || d < -v.window {
		return refuse(ReasonProofStale, "the proof's iat is more than %s from the gateway's clock", v.window)
	}
	fresh, err := v.store.firstUse(ctx, c.Cnf.JKT, pc.ID, 2*v.window+time.Second)
	if err != nil {
		return c, err
	}
	if !fresh {
		return refuse(ReasonProofReplayed, "the proof's jti was seen before")
	}
	return c, nil
}

// revoked is the last check: the revocation list.
func (v *Validator) revoked(ctx context.Context, c *Claims) (*Claims, error) {
	revoked, err := v.store.Revoked(ctx, c)
	if err != nil {
		return c, err
	}
	if revoked != "" {
		return c, &Refusal{Reason: ReasonRevoked, Msg: "the token was revoked (" + revoked + ")", JTI: c.ID, JKT: c.Cnf.JKT}
	}
	return c, nil
}

// constrain validates args against a token's constraint fragment; it
// returns "" when they satisfy it.
func (v *Validator) constrain(frag json.RawMessage, args json.RawMessage) string {
	sch, err := v.compile(frag)
	if err != nil {
		return "the token's argument constraint does not compile"
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(orEmpty(args)))
	if err != nil {
		return "the arguments are not a JSON object"
	}
	if err := sch.Validate(doc); err != nil {
		return "the arguments do not satisfy the token's constraint"
	}
	return ""
}

// CompileConstraint compiles a constraint fragment as a JSON Schema
// (2020-12), for checking a grant before it is issued.
func CompileConstraint(frag json.RawMessage) (*jsonschema.Schema, error) {
	if len(frag) > MaxConstraintBytes {
		return nil, fmt.Errorf("%w: the constraint exceeds %d bytes", ErrMalformed, MaxConstraintBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(frag))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	sum := sha256.Sum256(frag)
	url := "urn:quiver:capability:" + hex.EncodeToString(sum[:8])
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	// A fragment may not reach outside itself: no loader, so $ref to a
	// URL fails to compile rather than fetch.
	comp.UseLoader(noLoader{})
	if err := comp.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	s, err := comp.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return s, nil
}

func (v *Validator) compile(frag json.RawMessage) (*jsonschema.Schema, error) {
	sum := sha256.Sum256(frag)
	if s, ok := v.schemas.Get(sum); ok {
		return s, nil
	}
	s, err := CompileConstraint(frag)
	if err != nil {
		return nil, err
	}
	v.schemas.Add(sum, s)
	return s, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("capability constraints cannot load %s", url)
}

// StoreError reports whether err from Validate is the store's (not a
// refusal): state.ErrUnavailable and the like.
func StoreError(err error) bool {
	var r *Refusal
	return err != nil && !errors.As(err, &r)
}

// orEmpty makes absent or null arguments {}, as the proof's hash does.
func orEmpty(args json.RawMessage) []byte {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || string(t) == "null" {
		return []byte("{}")
	}
	return t
}
