package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Test key material, generated once per test binary run.
var (
	testRSA    = mustRSA()
	testRSA2   = mustRSA()
	testEC     = mustEC()
	testSecret = "0123456789abcdef0123456789abcdef-hs256-test-secret"
	testNow    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func mustRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

func mustEC() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func rsaJWK(kid string, k *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PublicKey) map[string]any {
	pt, err := k.Bytes()
	if err != nil {
		panic(err)
	}
	return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256",
		"x": base64.RawURLEncoding.EncodeToString(pt[1:33]),
		"y": base64.RawURLEncoding.EncodeToString(pt[33:])}
}

func jwks(keys ...map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return b
}

// sign signs claims with method and key, with an optional kid.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// claims returns valid claims for iss at testNow, with extra merged in.
func claims(iss string, extra jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss": iss, "sub": "alice", "aud": "quiver", "jti": "jti-1",
		"iat": testNow.Add(-time.Minute).Unix(), "nbf": testNow.Add(-time.Minute).Unix(),
		"exp":       testNow.Add(time.Hour).Unix(),
		"client_id": "claude-code", "org_id": "acme", "actor_type": "agent",
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// fixedClock is a settable clock.
type fixedClock struct{ ns atomic.Int64 }

func newClock(t time.Time) *fixedClock {
	c := &fixedClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *fixedClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fixedClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
