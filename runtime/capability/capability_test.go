package capability

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/quiver-mcp/quiver/runtime/state"
)

const (
	toolA = "fixtures:echo#0a1b2c3d"
	toolB = "fixtures:write#11223344"
	alice = "jwt:test:alice"
	bob   = "jwt:test:bob"
)

// fixture is a gateway's issuer and validator over one in-memory store,
// with a clock tests move.
type fixture struct {
	now   time.Time
	keys  *Keyring
	is    *Issuer
	store *Store
	val   *Validator
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	var err error
	if f.keys, err = NewKeyring(); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return f.now }
	f.is = &Issuer{Name: "quiver", Keys: f.keys, Now: clock}
	f.store = NewStore(state.NewMemory(clock), 24*time.Hour)
	if f.val, err = NewValidator(ValidatorOptions{Keys: f.keys, Store: f.store, Issuer: "quiver", Now: clock}); err != nil {
		t.Fatal(err)
	}
	return f
}

func holderKey(t testing.TB) (ed25519.PrivateKey, JWK) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, PublicJWK(pub)
}

func (f *fixture) issue(t testing.TB, g Grant) (string, *Claims) {
	t.Helper()
	if g.ExpiresAt.IsZero() {
		g.ExpiresAt = f.now.Add(time.Hour)
	}
	tok, c, err := f.is.Issue(g)
	if err != nil {
		t.Fatal(err)
	}
	return tok, c
}

func proof(t testing.TB, priv ed25519.PrivateKey, tool, args, session string, at time.Time) string {
	t.Helper()
	p, err := NewProof(priv, tool, json.RawMessage(args), session, at)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func reasonOf(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}

func TestValidateRefusals(t *testing.T) {
	f := newFixture(t)
	priv, pub := holderKey(t)
	otherPriv, _ := holderKey(t)
	tok, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA},
		Args: map[string]json.RawMessage{toolA: json.RawMessage(`{"properties":{"n":{"maximum":10}}}`)}})
	late, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}, NotBefore: f.now.Add(time.Minute)})
	expired, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}, NotBefore: f.now.Add(-2 * time.Hour), ExpiresAt: f.now.Add(-time.Hour)})
	bound, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}, Session: "s1"})

	other := newFixture(t) // another gateway: its own key
	foreign, _ := other.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
	sameKid := newFixture(t)
	sameKid.keys = f.keys
	sameKid.is.Keys = f.keys
	sameKid.is.Name = "elsewhere"
	otherIss, _ := sameKid.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})

	parts := strings.Split(tok, ".")
	claims, _ := json.Marshal(map[string]any{"jti": "x", "sub": alice, "tools": []string{toolA, toolB}})
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(claims) + "." + parts[2]
	forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 64))
	unsigned := func() string {
		tk := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": alice})
		s, _ := tk.SignedString(jwt.UnsafeAllowNoneSignatureType)
		return s
	}()

	now := f.now
	cases := []struct {
		name string
		p    Presented
		want string
	}{
		{"ok", Presented{Token: tok, Proof: proof(t, priv, toolA, `{"n":1}`, "", now), Holder: alice, ToolID: toolA, Args: json.RawMessage(`{"n":1}`)}, ""},
		{"missing", Presented{Holder: alice, ToolID: toolA}, ReasonMissing},
		{"garbage", Presented{Token: "not a token", Holder: alice, ToolID: toolA}, ReasonMalformed},
		{"alg none", Presented{Token: unsigned, Holder: alice, ToolID: toolA}, ReasonSignatureInvalid},
		{"tampered claims", Presented{Token: tampered, Holder: alice, ToolID: toolA}, ReasonSignatureInvalid},
		{"forged signature", Presented{Token: forged, Holder: alice, ToolID: toolA}, ReasonSignatureInvalid},
		{"another gateway's key", Presented{Token: foreign, Holder: alice, ToolID: toolA}, ReasonUnknownKey},
		{"another issuer", Presented{Token: otherIss, Holder: alice, ToolID: toolA}, ReasonUnknownKey},
		{"not yet valid", Presented{Token: late, Proof: proof(t, priv, toolA, `{}`, "", now), Holder: alice, ToolID: toolA}, ReasonNotYetValid},
		{"expired", Presented{Token: expired, Proof: proof(t, priv, toolA, `{}`, "", now), Holder: alice, ToolID: toolA}, ReasonExpired},
		{"stolen by bob", Presented{Token: tok, Proof: proof(t, priv, toolA, `{}`, "", now), Holder: bob, ToolID: toolA}, ReasonHolderMismatch},
		{"no proof", Presented{Token: tok, Holder: alice, ToolID: toolA}, ReasonProofMissing},
		{"proof by another key", Presented{Token: tok, Proof: proof(t, otherPriv, toolA, `{}`, "", now), Holder: alice, ToolID: toolA}, ReasonProofKeyMismatch},
		{"proof garbage", Presented{Token: tok, Proof: "a.b.c", Holder: alice, ToolID: toolA}, ReasonProofInvalid},
		{"proof for other args", Presented{Token: tok, Proof: proof(t, priv, toolA, `{"n":2}`, "", now), Holder: alice, ToolID: toolA, Args: json.RawMessage(`{"n":3}`)}, ReasonProofMismatch},
		{"proof for another tool", Presented{Token: tok, Proof: proof(t, priv, toolB, `{}`, "", now), Holder: alice, ToolID: toolA}, ReasonProofMismatch},
		{"stale proof", Presented{Token: tok, Proof: proof(t, priv, toolA, `{}`, "", now.Add(-61*time.Second)), Holder: alice, ToolID: toolA}, ReasonProofStale},
		{"future proof", Presented{Token: tok, Proof: proof(t, priv, toolA, `{}`, "", now.Add(61*time.Second)), Holder: alice, ToolID: toolA}, ReasonProofStale},
		{"tool not granted", Presented{Token: tok, Proof: proof(t, priv, toolB, `{}`, "", now), Holder: alice, ToolID: toolB}, ReasonToolNotGranted},
		{"args constraint", Presented{Token: tok, Proof: proof(t, priv, toolA, `{"n":11}`, "", now), Holder: alice, ToolID: toolA, Args: json.RawMessage(`{"n":11}`)}, ReasonArgsConstraint},
		{"bound, other session", Presented{Token: bound, Proof: proof(t, priv, toolA, `{}`, "s1", now), Holder: alice, ToolID: toolA, Session: "s2"}, ReasonSessionMismatch},
		{"bound, proof without session", Presented{Token: bound, Proof: proof(t, priv, toolA, `{}`, "", now), Holder: alice, ToolID: toolA, Session: "s1"}, ReasonSessionMismatch},
		{"bound, same session", Presented{Token: bound, Proof: proof(t, priv, toolA, `{}`, "s1", now), Holder: alice, ToolID: toolA, Session: "s1"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.val.Validate(context.Background(), c.p)
			if got := reasonOf(err); got != c.want {
				t.Fatalf("reason %q, want %q (%v)", got, c.want, err)
			}
		})
	}
}

func TestValidateReplay(t *testing.T) {
	f := newFixture(t)
	priv, pub := holderKey(t)
	tok, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
	p := Presented{Token: tok, Proof: proof(t, priv, toolA, `{}`, "", f.now), Holder: alice, ToolID: toolA}
	if _, err := f.val.Validate(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if _, err := f.val.Validate(context.Background(), p); reasonOf(err) != ReasonProofReplayed {
		t.Fatalf("replay: %v", err)
	}
	// Long after the window the nonce is forgotten, but the proof is stale.
	f.now = f.now.Add(3 * time.Minute)
	if _, err := f.val.Validate(context.Background(), p); reasonOf(err) != ReasonProofStale {
		t.Fatalf("old replay: %v", err)
	}
}

func TestRevocation(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	priv, pub := holderKey(t)
	call := func(tok string) string {
		_, err := f.val.Validate(ctx, Presented{Token: tok, Proof: proof(t, priv, toolA, `{}`, "", f.now), Holder: alice, ToolID: toolA})
		return reasonOf(err)
	}
	parentTok, parent := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA, toolB}})
	childTok, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}, Parent: parent})
	otherTok, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
	for _, tok := range []string{parentTok, childTok, otherTok} {
		if r := call(tok); r != "" {
			t.Fatalf("before revocation: %s", r)
		}
	}
	if err := f.store.Revoke(ctx, Revocation{Kind: RevokeJTI, Subject: parent.ID, By: "op", At: f.now}); err != nil {
		t.Fatal(err)
	}
	if r := call(parentTok); r != ReasonRevoked {
		t.Fatalf("parent: %s", r)
	}
	if r := call(childTok); r != ReasonRevoked {
		t.Fatalf("attenuation of a revoked parent: %s", r)
	}
	if r := call(otherTok); r != "" {
		t.Fatalf("unrelated token: %s", r)
	}
	if err := f.store.Revoke(ctx, Revocation{Kind: RevokeHolder, Subject: alice, By: "op", At: f.now}); err != nil {
		t.Fatal(err)
	}
	if r := call(otherTok); r != ReasonRevoked {
		t.Fatalf("holder revoked: %s", r)
	}
	f.now = f.now.Add(2 * time.Second)
	newTok, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
	if r := call(newTok); r != "" {
		t.Fatalf("a token issued after the holder's revocation: %s", r)
	}
	if err := f.store.Revoke(ctx, Revocation{Kind: RevokeKey, Subject: f.keys.CurrentKID(), By: "op", At: f.now}); err != nil {
		t.Fatal(err)
	}
	if r := call(newTok); r != ReasonRevoked {
		t.Fatalf("key revoked: %s", r)
	}
	if err := f.store.Revoke(ctx, Revocation{Kind: "everything", Subject: "x"}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad kind: %v", err)
	}
}

// TestMaxUsesConcurrent: 32 concurrent uses of a token with max_uses 5
// admit exactly 5.
func TestMaxUsesConcurrent(t *testing.T) {
	f := newFixture(t)
	priv, pub := holderKey(t)
	tok, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}, MaxUses: 5})
	proofs := make([]string, 32)
	for i := range proofs {
		proofs[i] = proof(t, priv, toolA, `{}`, "", f.now)
	}
	var ok, exhausted atomic.Int32
	var wg sync.WaitGroup
	for _, p := range proofs {
		wg.Go(func() {
			_, err := f.val.Validate(context.Background(), Presented{Token: tok, Proof: p, Holder: alice, ToolID: toolA})
			switch reasonOf(err) {
			case "":
				ok.Add(1)
			case ReasonUsesExhausted:
				exhausted.Add(1)
			default:
				t.Errorf("unexpected: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 || exhausted.Load() != 27 {
		t.Fatalf("%d admitted, %d exhausted; want 5 and 27", ok.Load(), exhausted.Load())
	}
}

func TestStoreUnavailableFailsClosed(t *testing.T) {
	f := newFixture(t)
	priv, pub := holderKey(t)
	tok, _ := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
	f.store.kv.Close()
	_, err := f.val.Validate(context.Background(), Presented{Token: tok, Proof: proof(t, priv, toolA, `{}`, "", f.now), Holder: alice, ToolID: toolA})
	if err == nil || !StoreError(err) {
		t.Fatalf("want a store error, got %v", err)
	}
}

func TestThumbprintRFC7638(t *testing.T) {
	// RFC 8037 appendix A.3: the thumbprint of the A.2 public key.
	k := JWK{Kty: "OKP", Crv: "Ed25519", X: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
	tp, err := k.Thumbprint()
	if err != nil {
		t.Fatal(err)
	}
	if tp != "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" {
		t.Fatalf("thumbprint %s", tp)
	}
	for _, bad := range []string{`{"kty":"EC","crv":"P-256","x":"a"}`, `{"kty":"OKP","crv":"Ed25519","x":"short"}`,
		`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"secret"}`, `[]`} {
		if _, err := ParseJWK([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestKeyringFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	k, err := OpenKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	first := k.CurrentKID()
	_, hk := holderKey(t)
	is := &Issuer{Name: "q", Keys: k}
	old, _, err := is.Issue(Grant{Holder: alice, Key: hk, Tools: []string{toolA}, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := RotateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := OpenKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	if k2.CurrentKID() != second || second == first {
		t.Fatalf("current %s after rotation to %s", k2.CurrentKID(), second)
	}
	// Kids are typed on command lines: never a leading "-".
	for range 64 {
		j, err := newKey()
		if err != nil {
			t.Fatal(err)
		}
		if len(j.Kid) != 16 || strings.Trim(j.Kid, "0123456789abcdef") != "" {
			t.Fatalf("kid %q is not 16 lower-case hex digits", j.Kid)
		}
	}
	if got := len(k2.JWKS().Keys); got != 2 {
		t.Fatalf("jwks has %d keys", got)
	}
	for _, j := range k2.JWKS().Keys {
		if j.D != "" {
			t.Fatal("the published set holds a private key")
		}
	}
	if _, _, err := parseToken(k2, old); err != nil {
		t.Fatalf("a token of the old key after rotation: %v", err)
	}
	if err := RetireKey(path, first); err != nil {
		t.Fatal(err)
	}
	k3, _ := OpenKeyring(path)
	if _, reason, _ := parseToken(k3, old); reason != ReasonUnknownKey {
		t.Fatalf("a token of a retired key: %q", reason)
	}
	if err := RetireKey(path, second); err == nil {
		t.Fatal("retired the last key")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenKeyring(path); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("a world-readable keyring: %v", err)
	}
}

func TestIssueChecks(t *testing.T) {
	f := newFixture(t)
	_, pub := holderKey(t)
	exp := f.now.Add(time.Hour)
	for name, g := range map[string]Grant{
		"no holder":            {Key: pub, Tools: []string{toolA}, ExpiresAt: exp},
		"no tools":             {Holder: alice, Key: pub, ExpiresAt: exp},
		"no expiry":            {Holder: alice, Key: pub, Tools: []string{toolA}},
		"bad key":              {Holder: alice, Key: JWK{Kty: "RSA"}, Tools: []string{toolA}, ExpiresAt: exp},
		"constraint elsewhere": {Holder: alice, Key: pub, Tools: []string{toolA}, ExpiresAt: exp, Args: map[string]json.RawMessage{toolB: json.RawMessage(`{}`)}},
	} {
		if _, _, err := f.is.Issue(g); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestAttenuate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	priv, pub := holderKey(t)
	childPriv, childPub := holderKey(t)
	_, parent := f.issue(t, Grant{Holder: alice, Key: pub, Tools: []string{toolA, toolB}, MaxUses: 5,
		Args: map[string]json.RawMessage{toolA: json.RawMessage(`{"properties":{"n":{"maximum":10}}}`)}})
	_ = priv
	for name, n := range map[string]Narrowing{
		"more tools":      {Holder: bob, Key: childPub, Tools: []string{"other:tool"}, MaxUses: 1},
		"later expiry":    {Holder: bob, Key: childPub, ExpiresAt: parent.ExpiresAt.Add(time.Second), MaxUses: 1},
		"more uses":       {Holder: bob, Key: childPub, MaxUses: 6},
		"unlimited child": {Holder: bob, Key: childPub},
	} {
		if _, err := Attenuate(parent, n, f.now); !errors.Is(err, ErrWidening) {
			t.Errorf("%s: %v", name, err)
		}
	}
	g, err := Attenuate(parent, Narrowing{Holder: bob, Key: childPub, Tools: []string{toolA}, MaxUses: 2,
		Args: map[string]json.RawMessage{toolA: json.RawMessage(`{"properties":{"n":{"minimum":5}}}`)}}, f.now)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.store.Delegate(ctx, parent, g.MaxUses, f.now); !ok || err != nil {
		t.Fatalf("delegate: %v %v", ok, err)
	}
	tok, child := f.issue(t, g)
	if child.Parent != parent.ID || len(child.Chain) != 1 || child.Subject != bob {
		t.Fatalf("child %+v", child)
	}
	call := func(args string) string {
		_, err := f.val.Validate(ctx, Presented{Token: tok, Proof: proof(t, childPriv, toolA, args, "", f.now), Holder: bob, ToolID: toolA, Args: json.RawMessage(args)})
		return reasonOf(err)
	}
	// Both constraints hold: the parent's maximum and the child's minimum.
	for args, want := range map[string]string{`{"n":11}`: ReasonArgsConstraint, `{"n":4}`: ReasonArgsConstraint, `{"n":7}`: ""} {
		if got := call(args); got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
	// The parent had 5 uses and handed 2 to the child: 3 are left to it.
	left, err := f.store.Delegate(ctx, parent, 4, f.now)
	if err != nil || left {
		t.Fatalf("the parent kept more than 3 uses: %v %v", left, err)
	}
}
