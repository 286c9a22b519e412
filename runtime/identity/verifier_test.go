package identity

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/units"

	"github.com/golang-jwt/jwt/v5"
)

const (
	issHS = "https://ci.example/"
	issRS = "https://idp.example/"
	issES = "https://edge.example/"
)

type fixture struct {
	v       *Verifier
	clock   *fixedClock
	fetches *atomic.Int64
	revoked *sync.Map // jti or "sub:"+sub -> true
	jwksSrv *httptest.Server
}

// newFixture builds a Verifier with three issuers: HS256 (env secret),
// RS256 (JWKS file, kids rsa-1 and rsa-2) and ES256 (JWKS served over
// HTTP, kid ec-1).
func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{clock: newClock(testNow), fetches: &atomic.Int64{}, revoked: &sync.Map{}}
	file := writeFile(t, "jwks.json", jwks(rsaJWK("rsa-1", &testRSA.PublicKey), rsaJWK("rsa-2", &testRSA2.PublicKey)))
	ecSet := jwks(ecJWK("ec-1", &testEC.PublicKey))
	f.jwksSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(ecSet)
	}))
	t.Cleanup(f.jwksSrv.Close)
	cfg := Config{Issuers: []IssuerConfig{
		{Name: "ci", Issuer: issHS, Audiences: []string{"quiver"}, Alg: AlgHS256, HS256SecretEnv: "QUIVER_TEST_SECRET"},
		{Name: "corp", Issuer: issRS, Audiences: []string{"quiver", "other"}, Alg: AlgRS256, JWKSFile: file},
		{Name: "edge", Issuer: issES, Audiences: []string{"quiver"}, Alg: AlgES256, JWKSURL: f.jwksSrv.URL + "/jwks"},
	}}
	v, err := NewVerifier(cfg, Options{
		Getenv: func(k string) string {
			if k == "QUIVER_TEST_SECRET" {
				return testSecret
			}
			return ""
		},
		Now: f.clock.Now,
		Revoked: func(_ context.Context, jti, sub string) (bool, error) {
			if _, down := f.revoked.Load("STATE_DOWN"); down {
				return true, errors.New("state down")
			}
			_, a := f.revoked.Load(jti)
			_, b := f.revoked.Load("sub:" + sub)
			return a || b, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	return f
}

func TestVerify(t *testing.T) {
	f := newFixture(t)
	hs := []byte(testSecret)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&testRSA.PublicKey))})
	f.revoked.Store("jti-revoked", true)
	f.revoked.Store("sub:mallory", true)
	f.revoked.Store("sub:jwt:ci:eve", true) // by principal key: ci's eve only

	valid := sign(t, jwt.SigningMethodRS256, testRSA, "rsa-1", claims(issRS, nil))
	parts := strings.Split(valid, ".")
	// Tamper: same header and signature, payload with another sub.
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+issRS+`","sub":"root","aud":"quiver","exp":9999999999}`)) + "." + parts[2]
	// Flip one signature bit.
	sig := must(base64.RawURLEncoding.DecodeString(parts[2]))
	sig[10] ^= 1
	badSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	noneTok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(issRS, nil))

	tests := []struct {
		name   string
		token  string
		reason string // "" = valid
		sub    string
	}{
		{"hs256 valid", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, nil)), "", "alice"},
		{"rs256 valid kid 1", valid, "", "alice"},
		{"rs256 valid kid 2", sign(t, jwt.SigningMethodRS256, testRSA2, "rsa-2", claims(issRS, jwt.MapClaims{"sub": "bob", "aud": []string{"x", "other"}})), "", "bob"},
		{"es256 valid via JWKS URL", sign(t, jwt.SigningMethodES256, testEC, "ec-1", claims(issES, nil)), "", "alice"},
		{"es256 without kid uses the only key", sign(t, jwt.SigningMethodES256, testEC, "", claims(issES, nil)), "", "alice"},
		{"expired", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"exp": testNow.Add(-2 * time.Minute).Unix()})), ReasonExpired, ""},
		{"expired within skew", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"exp": testNow.Add(-30 * time.Second).Unix()})), "", "alice"},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"nbf": testNow.Add(5 * time.Minute).Unix()})), ReasonNotYetValid, ""},
		{"nbf within skew", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"nbf": testNow.Add(30 * time.Second).Unix()})), "", "alice"},
		{"issued in the future", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"iat": testNow.Add(time.Hour).Unix()})), ReasonNotYetValid, ""},
		{"missing exp", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"exp": nil})), ReasonMissingClaim, ""},
		{"wrong aud", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"aud": "someone-else"})), ReasonWrongAudience, ""},
		{"missing aud", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"aud": nil})), ReasonMissingClaim, ""},
		{"unknown iss", sign(t, jwt.SigningMethodHS256, hs, "", claims("https://evil.example/", nil)), ReasonUnknownIssuer, ""},
		{"no iss", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"iss": nil})), ReasonUnknownIssuer, ""},
		{"alg confusion: HS256 keyed with the RSA public key", sign(t, jwt.SigningMethodHS256, rsaPEM, "rsa-1", claims(issRS, nil)), ReasonAlgNotAllowed, ""},
		{"alg confusion: RS256 against the HS256 issuer", sign(t, jwt.SigningMethodRS256, testRSA, "", claims(issHS, nil)), ReasonAlgNotAllowed, ""},
		{"ES256 against the RS256 issuer", sign(t, jwt.SigningMethodES256, testEC, "rsa-1", claims(issRS, nil)), ReasonAlgNotAllowed, ""},
		{"alg none", noneTok, ReasonAlgNotAllowed, ""},
		{"tampered payload", forged, ReasonBadSignature, ""},
		{"tampered signature", badSig, ReasonBadSignature, ""},
		{"wrong HS256 secret", sign(t, jwt.SigningMethodHS256, []byte("another-secret-of-more-than-32-bytes!!"), "", claims(issHS, nil)), ReasonBadSignature, ""},
		{"RS256 signed by a key not in the JWKS, valid kid", sign(t, jwt.SigningMethodRS256, testRSA2, "rsa-1", claims(issRS, nil)), ReasonBadSignature, ""},
		{"unknown kid", sign(t, jwt.SigningMethodRS256, testRSA, "rsa-9", claims(issRS, nil)), ReasonUnknownKID, ""},
		{"no kid with several keys", sign(t, jwt.SigningMethodRS256, testRSA, "", claims(issRS, nil)), ReasonUnknownKID, ""},
		{"oversized", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"pad": strings.Repeat("x", DefaultMaxTokenBytes)})), ReasonTooLarge, ""},
		{"revoked jti", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"jti": "jti-revoked"})), ReasonRevoked, ""},
		{"revoked subject", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"sub": "mallory"})), ReasonRevoked, ""},
		{"revoked principal key", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"sub": "eve"})), ReasonRevoked, ""},
		{"same sub, another issuer", sign(t, jwt.SigningMethodRS256, testRSA, "rsa-1", claims(issRS, jwt.MapClaims{"sub": "eve"})), "", "eve"},
		{"missing sub", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"sub": nil})), ReasonMissingClaim, ""},
		{"sub not a string", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"sub": 42})), ReasonBadClaim, ""},
		{"bad actor_type", sign(t, jwt.SigningMethodHS256, hs, "", claims(issHS, jwt.MapClaims{"actor_type": "root"})), ReasonBadClaim, ""},
		{"empty", "", ReasonMissingToken, ""},
		{"garbage", "not a token", ReasonMalformedToken, ""},
		{"two segments", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0", ReasonMalformedToken, ""},
		{"bad base64 header", "!!!.eyJzdWIiOiJ4In0.c2ln", ReasonMalformedToken, ""},
		{"header not JSON", "bm90anNvbg.eyJzdWIiOiJ4In0.c2ln", ReasonMalformedToken, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := f.v.Verify(context.Background(), tc.token)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if p.Sub != tc.sub {
					t.Fatalf("sub = %q, want %q", p.Sub, tc.sub)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted the token as %+v", p)
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("error %v does not match ErrInvalidToken", err)
			}
			if got := Reason(err); got != tc.reason {
				t.Fatalf("reason = %q (%v), want %q", got, err, tc.reason)
			}
			if !p.IsZero() {
				t.Fatalf("a refused token returned principal %+v", p)
			}
			if strings.Contains(err.Error(), tc.token) && tc.token != "" {
				t.Fatalf("the error quotes the token")
			}
		})
	}
}

func TestVerifyPrincipal(t *testing.T) {
	f := newFixture(t)
	tok := sign(t, jwt.SigningMethodRS256, testRSA, "rsa-1", claims(issRS, jwt.MapClaims{"groups": []string{"eng", "sre"}}))
	p, err := f.v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sub != "alice" || p.ActorType != ActorAgent || p.ClientID != "claude-code" || p.OrgID != "acme" ||
		p.Issuer != "corp" || p.JTI != "jti-1" || !p.ExpiresAt.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("principal = %+v", p)
	}
	if p.Key() != "jwt:corp:alice" {
		t.Fatalf("key = %q", p.Key())
	}
	if g, _ := p.Claim("groups").([]any); len(g) != 2 {
		t.Fatalf("groups claim = %#v", p.Claim("groups"))
	}
	// Defaults: no actor_type -> user; azp stands in for client_id.
	tok = sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(issHS, jwt.MapClaims{"actor_type": nil, "client_id": nil, "azp": "cursor"}))
	p, err = f.v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.ActorType != ActorUser || p.ClientID != "cursor" || p.Key() != "jwt:ci:alice" {
		t.Fatalf("principal = %+v", p)
	}
}

func TestJWKSRotationAndRateLimit(t *testing.T) {
	clock := newClock(testNow)
	var mu sync.Mutex
	set := jwks(ecJWK("ec-1", &testEC.PublicKey))
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(set)
	}))
	defer srv.Close()
	v, err := NewVerifier(Config{Issuers: []IssuerConfig{{Name: "edge", Issuer: issES, Audiences: []string{"quiver"}, Alg: AlgES256,
		JWKSURL: srv.URL, JWKSRefresh: units.Duration(time.Minute)}}}, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Preload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := func(key any, kid string) error {
		_, err := v.Verify(ctx, sign(t, jwt.SigningMethodES256, key, kid, claims(issES, jwt.MapClaims{"exp": clock.Now().Add(time.Hour).Unix()})))
		return err
	}
	if err := ok(testEC, "ec-1"); err != nil || fetches.Load() != 1 {
		t.Fatalf("err %v, fetches %d", err, fetches.Load())
	}
	// The issuer rotates in a new key.
	ec2 := mustEC()
	mu.Lock()
	set = jwks(ecJWK("ec-1", &testEC.PublicKey), ecJWK("ec-2", &ec2.PublicKey))
	mu.Unlock()
	// An unknown kid right after a load does not refetch (rate limit)...
	if err := ok(ec2, "ec-2"); Reason(err) != ReasonUnknownKID || fetches.Load() != 1 {
		t.Fatalf("err %v, fetches %d", err, fetches.Load())
	}
	// ...but does once MinJWKSRefresh has passed, and finds the new key.
	clock.Advance(MinJWKSRefresh)
	if err := ok(ec2, "ec-2"); err != nil || fetches.Load() != 2 {
		t.Fatalf("err %v, fetches %d", err, fetches.Load())
	}
	// Forged kids cannot make it fetch again within the interval.
	for i := range 20 {
		_ = ok(ec2, "forged-"+string(rune('a'+i)))
	}
	if fetches.Load() != 2 {
		t.Fatalf("fetches = %d after forged kids", fetches.Load())
	}
	// After the refresh interval the set is reloaded; when the source
	// fails, the old keys stay in use.
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	clock.Advance(2 * time.Minute)
	if err := ok(testEC, "ec-1"); err != nil {
		t.Fatalf("stale keys not used while the JWKS is down: %v", err)
	}
	if fetches.Load() != 3 {
		t.Fatalf("fetches = %d", fetches.Load())
	}
}

func TestJWKSUnavailable(t *testing.T) {
	v, err := NewVerifier(Config{Issuers: []IssuerConfig{{Name: "corp", Issuer: issRS, Audiences: []string{"quiver"}, Alg: AlgRS256,
		JWKSFile: "/nonexistent/jwks.json"}}}, Options{Now: newClock(testNow).Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Preload(context.Background()); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("Preload = %v", err)
	}
	_, err = v.Verify(context.Background(), sign(t, jwt.SigningMethodRS256, testRSA, "rsa-1", claims(issRS, nil)))
	if Reason(err) != ReasonKeysUnavailable {
		t.Fatalf("err = %v", err)
	}
}

func TestParseJWKS(t *testing.T) {
	tests := []struct {
		name string
		alg  string
		doc  []byte
		keys int
		ok   bool
	}{
		{"rsa", AlgRS256, jwks(rsaJWK("a", &testRSA.PublicKey)), 1, true},
		{"ec keys skipped for RS256", AlgRS256, jwks(rsaJWK("a", &testRSA.PublicKey), ecJWK("b", &testEC.PublicKey)), 1, true},
		{"no usable key", AlgES256, jwks(rsaJWK("a", &testRSA.PublicKey)), 0, false},
		{"weak rsa skipped", AlgRS256, jwks(rsaJWK("a", weakRSA())), 0, false},
		{"encryption key skipped", AlgES256, jwks(merge(ecJWK("a", &testEC.PublicKey), map[string]any{"use": "enc"})), 0, false},
		{"other alg skipped", AlgRS256, jwks(merge(rsaJWK("a", &testRSA.PublicKey), map[string]any{"alg": "RS512"})), 0, false},
		{"private key refused", AlgES256, jwks(merge(ecJWK("a", &testEC.PublicKey), map[string]any{"d": "AAAA"})), 0, false},
		{"point not on curve", AlgES256, jwks(merge(ecJWK("a", &testEC.PublicKey), map[string]any{"y": base64.RawURLEncoding.EncodeToString(make([]byte, 32))})), 0, false},
		{"duplicate kid", AlgRS256, jwks(rsaJWK("a", &testRSA.PublicKey), rsaJWK("a", &testRSA2.PublicKey)), 0, false},
		{"not json", AlgRS256, []byte("{"), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ks, err := parseJWKS(tc.doc, tc.alg)
			if !tc.ok {
				if err == nil || !errors.Is(err, ErrKeysUnavailable) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || len(ks.all) != tc.keys {
				t.Fatalf("keys %v, err %v", ks, err)
			}
		})
	}
}

// weakRSA is a 1024-bit public key (built by hand: crypto/rsa refuses
// to generate one); only its size matters.
func weakRSA() *rsa.PublicKey {
	n := new(big.Int).Lsh(big.NewInt(1), 1023)
	return &rsa.PublicKey{N: n.Add(n, big.NewInt(1)), E: 65537}
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestConfigValidate(t *testing.T) {
	good := IssuerConfig{Name: "corp", Issuer: issRS, Audiences: []string{"quiver"}, Alg: AlgRS256, JWKSURL: "https://idp.example/jwks"}
	mod := func(f func(*IssuerConfig)) Config {
		ic := good
		ic.Audiences = append([]string(nil), good.Audiences...)
		f(&ic)
		return Config{Issuers: []IssuerConfig{ic}}
	}
	tests := []struct {
		name  string
		cfg   Config
		field string // "" = valid
	}{
		{"valid", mod(func(*IssuerConfig) {}), ""},
		{"valid hs256", mod(func(c *IssuerConfig) { c.Alg, c.JWKSURL, c.HS256SecretEnv = AlgHS256, "", "S" }), ""},
		{"loopback http jwks", mod(func(c *IssuerConfig) { c.JWKSURL = "http://127.0.0.1:9/jwks" }), ""},
		{"bad name", mod(func(c *IssuerConfig) { c.Name = "Corp:1" }), "issuers[0].name"},
		{"reserved name", mod(func(c *IssuerConfig) { c.Name = "local" }), "issuers[0].name"},
		{"no iss", mod(func(c *IssuerConfig) { c.Issuer = "" }), "issuers[0].iss"},
		{"no audience", mod(func(c *IssuerConfig) { c.Audiences = nil }), "issuers[0].audiences"},
		{"empty audience", mod(func(c *IssuerConfig) { c.Audiences = []string{""} }), "issuers[0].audiences"},
		{"alg none", mod(func(c *IssuerConfig) { c.Alg = "none" }), "issuers[0].alg"},
		{"hs256 with jwks", mod(func(c *IssuerConfig) { c.Alg, c.HS256SecretEnv = AlgHS256, "S" }), "issuers[0]"},
		{"rs256 with secret", mod(func(c *IssuerConfig) { c.HS256SecretEnv = "S" }), "issuers[0]"},
		{"rs256 with two sources", mod(func(c *IssuerConfig) { c.JWKSFile = "/k" }), "issuers[0]"},
		{"rs256 without source", mod(func(c *IssuerConfig) { c.JWKSURL = "" }), "issuers[0]"},
		{"plain http jwks", mod(func(c *IssuerConfig) { c.JWKSURL = "http://idp.example/jwks" }), "issuers[0].jwks_url"},
		{"bad env name", mod(func(c *IssuerConfig) { c.Alg, c.JWKSURL, c.HS256SecretEnv = AlgHS256, "", "1X" }), "issuers[0].hs256_secret_env"},
		{"skew too large", mod(func(c *IssuerConfig) { c.ClockSkew = units.Duration(time.Hour) }), "issuers[0].clock_skew"},
		{"refresh too small", mod(func(c *IssuerConfig) { c.JWKSRefresh = units.Duration(time.Second) }), "issuers[0].jwks_refresh"},
		{"bad default actor", mod(func(c *IssuerConfig) { c.DefaultActorType = "robot" }), "issuers[0].default_actor_type"},
		{"duplicate", Config{Issuers: []IssuerConfig{good, good}}, "issuers[1].name"},
		{"bad local actor", Config{Local: LocalConfig{ActorType: "x"}}, "local.actor_type"},
		{"token cap", Config{MaxTokenBytes: -1}, "max_token_bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "auth."+tc.field+":") {
				t.Fatalf("err = %v, want one about auth.%s", err, tc.field)
			}
		})
	}
}

func TestNewVerifierSecrets(t *testing.T) {
	cfg := Config{Issuers: []IssuerConfig{{Name: "ci", Issuer: issHS, Audiences: []string{"q"}, Alg: AlgHS256, HS256SecretEnv: "S"}}}
	if _, err := NewVerifier(cfg, Options{Getenv: func(string) string { return "" }}); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing secret: %v", err)
	}
	if _, err := NewVerifier(cfg, Options{Getenv: func(string) string { return "short" }}); !errors.Is(err, ErrConfig) {
		t.Fatalf("short secret: %v", err)
	}
}

func TestLocalPrincipal(t *testing.T) {
	p := LocalConfig{Sub: "bob"}.Principal()
	if p.Key() != "local:bob" || p.ActorType != ActorUser || p.Issuer != LocalIssuer {
		t.Fatalf("%+v key %q", p, p.Key())
	}
	if (LocalConfig{}).Principal().Sub == "" {
		t.Fatal("default local principal has no sub")
	}
	if (Principal{}).Key() != "" {
		t.Fatal("zero principal has a key")
	}
	ctx := WithPrincipal(context.Background(), p)
	if got, ok := FromContext(ctx); !ok || got.Sub != "bob" {
		t.Fatal("context round trip")
	}
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("principal from an empty context")
	}
}
