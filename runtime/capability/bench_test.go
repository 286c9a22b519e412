package capability

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkValidate is the cost a call pays for its capability: the token
// (its signature cached after the first use), a fresh proof's signature,
// the replay cache, the use counter and the revocation list, on the
// in-memory store. The proofs are signed before the timer starts.
func BenchmarkValidate(b *testing.B) {
	f := newFixture(b)
	priv, pub := holderKey(b)
	tok, _ := f.issue(b, Grant{Holder: alice, Key: pub, Tools: []string{toolA, toolB}, MaxUses: 1 << 30,
		Args: map[string]json.RawMessage{toolA: json.RawMessage(`{"properties":{"n":{"maximum":10}}}`)}})
	args := json.RawMessage(`{"n":3,"path":"/srv/data/report.csv"}`)
	proofs := make([]string, b.N)
	for i := range proofs {
		proofs[i] = proof(b, priv, toolA, string(args), "", f.now)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.val.Validate(ctx, Presented{Token: tok, Proof: proofs[i], Holder: alice, ToolID: toolA, Args: args}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateColdToken is BenchmarkValidate with a new token every
// call: both signatures verified.
func BenchmarkValidateColdToken(b *testing.B) {
	f := newFixture(b)
	priv, pub := holderKey(b)
	toks := make([]string, b.N)
	proofs := make([]string, b.N)
	for i := range toks {
		toks[i], _ = f.issue(b, Grant{Holder: alice, Key: pub, Tools: []string{toolA}})
		proofs[i] = proof(b, priv, toolA, `{}`, "", f.now)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.val.Validate(ctx, Presented{Token: toks[i], Proof: proofs[i], Holder: alice, ToolID: toolA}); err != nil {
			b.Fatal(err)
		}
	}
}
