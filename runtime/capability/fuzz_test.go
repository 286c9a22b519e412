package capability

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzToken feeds arbitrary text to the token parser: it must refuse with
// a reason, never panic, never accept.
func FuzzToken(f *testing.F) {
	fx := newFixture(f)
	_, pub := holderKey(f)
	tok, _ := fx.issue(f, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
	f.Add(tok)
	f.Add(tok[:len(tok)-3])
	f.Add("eyJhbGciOiJFZERTQSJ9.e30.")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, reason, err := parseToken(fx.keys, s)
		if err == nil {
			if s != tok {
				// Only the issued token verifies (a different encoding of
				// the same signature would be a forgery).
				t.Fatalf("accepted %q", s)
			}
			if c.Subject != alice {
				t.Fatalf("claims %+v", c)
			}
			return
		}
		if reason == "" {
			t.Fatalf("refusal without a reason: %v", err)
		}
		_, _, _ = ParseUnverified(s)
	})
}

// FuzzProof feeds arbitrary text as the proof of a valid token, and
// arbitrary JSON as a holder key.
func FuzzProof(f *testing.F) {
	fx := newFixture(f)
	priv, pub := holderKey(f)
	tok, c := fx.issue(f, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
	f.Add(proof(f, priv, toolA, `{}`, "", fx.now), `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`)
	f.Add("a.b.c", `{}`)
	f.Fuzz(func(t *testing.T, p, jwk string) {
		pc, reason, err := parseProof(p, c.Cnf.JKT)
		if err != nil && reason == "" {
			t.Fatalf("refusal without a reason: %v", err)
		}
		if err == nil && pc.ID == "" {
			t.Fatal("accepted a proof without jti")
		}
		_, _ = fx.val.Validate(context.Background(), Presented{Token: tok, Proof: p, Holder: alice, ToolID: toolA, Args: json.RawMessage(`{}`)})
		_, _ = ParseJWK([]byte(jwk))
	})
}
