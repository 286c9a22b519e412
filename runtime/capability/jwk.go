package capability

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// JWK is an Ed25519 key as an RFC 8037 OKP JSON Web Key. D, the private
// part, is set only in a keyring file, never in a published set.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	D   string `json:"d,omitempty"`
	Kid string `json:"kid,omitempty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
}

// PublicJWK is the public JWK of an Ed25519 key.
func PublicJWK(pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub)}
}

// PublicKey returns the key's public part, or ErrMalformed when the JWK is
// not an Ed25519 OKP key.
func (k JWK) PublicKey() (ed25519.PublicKey, error) {
	if k.Kty != "OKP" || k.Crv != "Ed25519" {
		return nil, fmt.Errorf("%w: the key must be an OKP JWK with crv Ed25519", ErrMalformed)
	}
	x, err := base64.RawURLEncoding.DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: the key's x is not a base64url Ed25519 public key", ErrMalformed)
	}
	return ed25519.PublicKey(x), nil
}

// Thumbprint is the RFC 7638 thumbprint of the key's public part:
// base64url(sha256 of {"crv","kty","x"} in that order, no whitespace).
// It is what a token's cnf.jkt names.
func (k JWK) Thumbprint() (string, error) {
	if _, err := k.PublicKey(); err != nil {
		return "", err
	}
	// The members are fixed strings and a base64url value, so this
	// encoding is the canonical one RFC 7638 asks for.
	b, err := json.Marshal(struct {
		Crv string `json:"crv"`
		Kty string `json:"kty"`
		X   string `json:"x"`
	}{k.Crv, k.Kty, k.X})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// ParseJWK parses a public OKP JWK from JSON, refusing oversized input and
// any key that is not Ed25519. A private member is refused: a holder key
// sent to the gateway must never carry its secret.
func ParseJWK(raw []byte) (JWK, error) {
	if len(raw) > maxJWKBytes {
		return JWK{}, fmt.Errorf("%w: the key exceeds %d bytes", ErrMalformed, maxJWKBytes)
	}
	var k JWK
	if err := json.Unmarshal(raw, &k); err != nil {
		return JWK{}, fmt.Errorf("%w: the key is not a JSON object", ErrMalformed)
	}
	if k.D != "" {
		return JWK{}, fmt.Errorf("%w: the key holds a private part (d); send the public key only", ErrMalformed)
	}
	if _, err := k.PublicKey(); err != nil {
		return JWK{}, err
	}
	return JWK{Kty: k.Kty, Crv: k.Crv, X: k.X}, nil
}

// jwkFromHeader reads the jwk header of a proof as golang-jwt decoded it.
func jwkFromHeader(v any) (JWK, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return JWK{}, fmt.Errorf("%w: the proof header has no jwk object", ErrMalformed)
	}
	str := func(name string) string { s, _ := m[name].(string); return s }
	if _, ok := m["d"]; ok {
		return JWK{}, fmt.Errorf("%w: the proof's jwk holds a private part", ErrMalformed)
	}
	k := JWK{Kty: str("kty"), Crv: str("crv"), X: str("x")}
	if _, err := k.PublicKey(); err != nil {
		return JWK{}, err
	}
	return k, nil
}
