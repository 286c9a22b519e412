// Package capability issues, verifies, narrows and revokes capability
// tokens (spec 004): grants that let one principal, holding one key, call
// named tools for a while, signed by the gateway.
//
// A token is a compact JWS signed with Ed25519 (EdDSA) by a key of the
// gateway's [Keyring] (header typ "quiver-cap+jwt" and kid). Its claims
// ([Claims]) name the holder principal (sub), the holder's key by its RFC
// 7638 thumbprint (cnf.jkt), the tools, the validity (nbf, exp), and the
// constraints: max_uses, JSON Schema fragments the arguments of a tool
// must satisfy, and an optional MCP session binding.
//
// A token alone is useless to whoever sees it: every use carries a proof
// of possession in the style of DPoP (RFC 9449), a JWS signed by the
// holder's key over a fresh nonce (jti), the time (iat), the tool and the
// sha256 of the canonical arguments ([NewProof]). The [Validator] checks a
// presented token and proof in a fixed order and refuses with a stable
// reason ([Refusal]); it keeps its replay cache, use counters and the
// revocation list in a state.KV shared by every replica ([Store]).
//
// The package knows nothing of MCP or of the execute pipeline: the runtime
// calls it next to the policy.
package capability

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Limits on what the package parses, checked before any work.
const (
	// MaxTokenBytes caps a presented token.
	MaxTokenBytes = 16 << 10
	// MaxProofBytes caps a presented proof.
	MaxProofBytes = 4 << 10
	// MaxTools caps the tools of one token.
	MaxTools = 64
	// MaxChain caps how deep attenuations nest.
	MaxChain = 8
	// MaxConstraintBytes caps one tool's argument constraint.
	MaxConstraintBytes = 8 << 10
	maxJWKBytes        = 1 << 10
)

// Header types of the two JWS kinds.
const (
	TokenType = "quiver-cap+jwt"
	ProofType = "quiver-cap-pop+jwt"
)

// Sentinel errors, for errors.Is.
var (
	// ErrMalformed reports input that is not a well-formed token, proof or
	// key.
	ErrMalformed = errors.New("capability: malformed")
	// ErrWidening reports an attenuation that asks for more than its
	// parent grants.
	ErrWidening = errors.New("capability: attenuation cannot widen")
)

// Confirmation is the cnf claim (RFC 7800): the holder key's thumbprint.
type Confirmation struct {
	JKT string `json:"jkt"`
}

// Claims are the claims of a capability token.
type Claims struct {
	// ID (jti), Issuer (iss), Subject (sub, the holder's principal key),
	// NotBefore, ExpiresAt and IssuedAt.
	jwt.RegisteredClaims
	Cnf   Confirmation `json:"cnf"`
	Tools []string     `json:"tools"`
	// MaxUses bounds the calls the token allows over its life, across
	// every replica; 0 is unlimited.
	MaxUses int `json:"max_uses,omitempty"`
	// Args maps a tool_id to a JSON Schema fragment (2020-12) its
	// arguments must satisfy besides the tool's own schema.
	Args map[string]json.RawMessage `json:"args,omitempty"`
	// Session, when set, binds the token to one MCP session.
	Session string `json:"session,omitempty"`
	// Parent is the jti this token was attenuated from, and Chain every
	// ancestor, root first: revoking any of them revokes this token.
	Parent string   `json:"parent,omitempty"`
	Chain  []string `json:"chain,omitempty"`

	// kid is the signing key's id, from the header.
	kid string
}

// KID names the gateway key that signed the token.
func (c *Claims) KID() string { return c.kid }

// Holder returns the holder principal's key (sub).
func (c *Claims) Holder() string { return c.Subject }

// Grants reports whether the token names toolID.
func (c *Claims) Grants(toolID string) bool { return slices.Contains(c.Tools, toolID) }

// Grant is what the gateway decided to grant: the input of Issue.
type Grant struct {
	// Holder is the principal key of the holder.
	Holder string
	// Key is the holder's public key.
	Key JWK
	// Tools are the tool_ids granted.
	Tools []string
	// NotBefore and ExpiresAt bound the token's life; a zero NotBefore is
	// the time of issue.
	NotBefore, ExpiresAt time.Time
	MaxUses              int
	Args                 map[string]json.RawMessage
	Session              string
	// Parent is the token attenuated, nil for a root grant.
	Parent *Claims
}

// Issuer signs tokens with the current key of a keyring.
type Issuer struct {
	// Name is the iss of every token.
	Name string
	Keys *Keyring
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

func (is *Issuer) now() time.Time {
	if is.Now != nil {
		return is.Now()
	}
	return time.Now()
}

// Issue signs a token for g and returns it with its claims.
func (is *Issuer) Issue(g Grant) (string, *Claims, error) {
	jkt, err := g.Key.Thumbprint()
	if err != nil {
		return "", nil, err
	}
	if err := checkGrant(g); err != nil {
		return "", nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return "", nil, err
	}
	now := is.now().Truncate(time.Second)
	nbf := g.NotBefore
	if nbf.IsZero() {
		nbf = now
	}
	c := &Claims{
		RegisteredClaims: jwt.RegisteredClaims{ID: id.String(), Issuer: is.Name, Subject: g.Holder,
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(nbf), ExpiresAt: jwt.NewNumericDate(g.ExpiresAt)},
		Cnf: Confirmation{JKT: jkt}, Tools: slices.Clone(g.Tools), MaxUses: g.MaxUses,
		Args: maps.Clone(g.Args), Session: g.Session,
	}
	if g.Parent != nil {
		c.Parent = g.Parent.ID
		c.Chain = append(slices.Clone(g.Parent.Chain), g.Parent.ID)
	}
	sk := is.Keys.signer()
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = sk.kid
	t.Header["typ"] = TokenType
	s, err := t.SignedString(sk.priv)
	if err != nil {
		return "", nil, err
	}
	c.kid = sk.kid
	return s, c, nil
}

func checkGrant(g Grant) error {
	switch {
	case g.Holder == "":
		return fmt.Errorf("%w: no holder", ErrMalformed)
	case len(g.Tools) == 0 || len(g.Tools) > MaxTools:
		return fmt.Errorf("%w: a token names 1 to %d tools", ErrMalformed, MaxTools)
	case g.ExpiresAt.IsZero():
		return fmt.Errorf("%w: no expiry", ErrMalformed)
	case g.MaxUses < 0:
		return fmt.Errorf("%w: max_uses is negative", ErrMalformed)
	case g.Parent != nil && len(g.Parent.Chain) >= MaxChain:
		return fmt.Errorf("%w: attenuations nest at most %d deep", ErrMalformed, MaxChain)
	}
	for tool, s := range g.Args {
		if len(s) > MaxConstraintBytes {
			return fmt.Errorf("%w: the constraint of %q exceeds %d bytes", ErrMalformed, tool, MaxConstraintBytes)
		}
		if !slices.Contains(g.Tools, tool) {
			return fmt.Errorf("%w: a constraint names %q, which the token does not grant", ErrMalformed, tool)
		}
	}
	return nil
}

// tokenParser parses tokens: EdDSA only, and the validity is checked by
// the Validator in its own order.
var tokenParser = jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithoutClaimsValidation())

// ParseUnverified decodes a token's claims and kid without checking its
// signature: for tools that display a token, never for a decision.
func ParseUnverified(token string) (*Claims, string, error) {
	if len(token) > MaxTokenBytes {
		return nil, "", fmt.Errorf("%w: the token exceeds %d bytes", ErrMalformed, MaxTokenBytes)
	}
	c := &Claims{}
	t, _, err := tokenParser.ParseUnverified(token, c)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	c.kid, _ = t.Header["kid"].(string)
	return c, c.kid, nil
}

// parseToken verifies a token's signature against the keyring and decodes
// its claims; the reason says why it failed.
func parseToken(keys *Keyring, token string) (*Claims, string, error) {
	if len(token) > MaxTokenBytes {
		return nil, ReasonMalformed, fmt.Errorf("the token exceeds %d bytes", MaxTokenBytes)
	}
	c := &Claims{}
	var unknownKid bool
	var kid string
	_, err := tokenParser.ParseWithClaims(token, c, func(t *jwt.Token) (any, error) {
		if typ, _ := t.Header["typ"].(string); typ != TokenType {
			return nil, fmt.Errorf("%w: typ must be %s", ErrMalformed, TokenType)
		}
		kid, _ = t.Header["kid"].(string)
		pub, ok := keys.lookup(kid)
		if !ok {
			unknownKid = true
			return nil, errors.New("no gateway key has this kid")
		}
		return pub, nil
	})
	switch {
	case err == nil:
	case unknownKid:
		return nil, ReasonUnknownKey, err
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return nil, ReasonSignatureInvalid, err
	default:
		return nil, ReasonMalformed, err
	}
	if c.ID == "" || c.Subject == "" || c.Cnf.JKT == "" || len(c.Tools) == 0 || len(c.Tools) > MaxTools ||
		c.ExpiresAt == nil || c.NotBefore == nil || c.MaxUses < 0 || len(c.Chain) > MaxChain {
		return nil, ReasonMalformed, errors.New("a required claim is missing or out of range")
	}
	c.kid = kid
	return c, "", nil
}

// signProof signs proof claims with the holder's key, its public JWK in
// the header (DPoP style).
func signProof(priv ed25519.PrivateKey, pc *ProofClaims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, pc)
	t.Header["typ"] = ProofType
	t.Header["jwk"] = PublicJWK(priv.Public().(ed25519.PublicKey))
	return t.SignedString(priv)
}
