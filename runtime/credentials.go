package runtime

import (
	"context"
	"crypto/sha256"

	"github.com/quiver-mcp/quiver/runtime/credscan"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// ReasonCredentialPrefix prefixes, after ReasonClientToken, the kind of
// credential found (credscan.Kind*): CREDENTIAL_COOKIE, CREDENTIAL_JWT, ...
const ReasonCredentialPrefix = "CREDENTIAL_"

// clientCredential returns the first credential in decoded arguments, the
// caller's own bearer token included (compared by digest), or nil.
func clientCredential(ctx context.Context, args map[string]any) *credscan.Finding {
	sc := &credscan.Scanner{}
	if c := callerOf(ctx); c != nil && c.subject != nil {
		sc = credscan.WithCaller(sha256.Sum256([]byte(c.subject.Reveal())))
	}
	return sc.Scan(args)
}

// blockClientToken refuses a call whose arguments carry a client
// credential f: the credential boundary (spec 001 MUST 5) admits upstream
// credentials only from the upstream's own configuration. Nothing was
// forwarded, so the receipt says blocked with passthrough_detected false.
// The refusal names the key and the kind, never the value.
// A dry run (dry) leaves the receipt's reasons alone.
func blockClientToken(ctx context.Context, f *credscan.Finding, dry bool) *Error {
	reasons := []string{ReasonClientToken, ReasonCredentialPrefix + f.Kind}
	if c := callerOf(ctx); c != nil {
		c.rc.TokenHandling = receipts.TokenHandling{Mode: receipts.TokenBlocked}
		if !dry {
			c.reasons = append(c.reasons, reasons...)
		}
	}
	e := newError(CodeClientCredentialRejected, "the arguments carry a credential; quiver never forwards client credentials upstream").
		withDetail("reason_codes", reasons).withDetail("kind", f.Kind)
	if f.Key != "" {
		e.withDetail("arg", f.Key)
	}
	return e
}
