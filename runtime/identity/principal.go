// Package identity authenticates the callers of quiver's HTTP surface and
// carries who they are through a request.
//
// A [Principal] is the authenticated caller: a subject, an actor type, the
// MCP client and organisation it acts for, and the claims it presented.
// [Principal.Key] is the stable key that scopes what belongs to a caller
// (artifacts, rate limits, idempotency records, approvals).
//
// A [Verifier] validates bearer JWTs against configured issuers (spec 001
// MUST 2): HS256 with a secret from the environment, or RS256/ES256 with
// keys from a JWKS file or URL. The algorithm is pinned per issuer, iss,
// aud, exp and nbf are checked with a small clock skew, the token size is
// capped before parsing, and a revocation hook sees every token's jti and
// subject. [Verifier.Middleware] authenticates every HTTP request before any
// MCP routing, answers 401 with a WWW-Authenticate challenge otherwise, and
// removes the Authorization header so nothing downstream can forward it
// (spec 001 MUST 5).
//
// Stdio sessions have no token: the process owner is the trust boundary and
// [LocalConfig.Principal] names it.
package identity

import (
	"context"
	"maps"
	"time"
)

// Actor types (spec 001 receipt principal.actor_type).
const (
	ActorUser   = "user"
	ActorAgent  = "agent"
	ActorSystem = "system"
)

// LocalIssuer is the Issuer of principals that did not present a token:
// the local principal of stdio sessions.
const LocalIssuer = "local"

// Principal is an authenticated caller. It is a value: copying it is safe,
// but Claims is shared and must be treated as read-only.
type Principal struct {
	// Sub is the subject (the JWT sub claim, or the local user name).
	Sub string `json:"sub"`
	// ActorType is user, agent or system.
	ActorType string `json:"actor_type"`
	// ClientID is the MCP client the principal acts through (client_id or
	// azp claim), "" when unknown.
	ClientID string `json:"client_id,omitempty"`
	// OrgID is the principal's organisation, "" when unknown.
	OrgID string `json:"org_id,omitempty"`
	// Issuer is the name of the configured issuer that vouched for the
	// principal ([IssuerConfig.Name]), or [LocalIssuer].
	Issuer string `json:"issuer"`
	// JTI is the token's jti claim ("" for local principals and tokens
	// without one); the handle for revoking one token.
	JTI string `json:"jti,omitempty"`
	// ExpiresAt is the token's expiry (zero for local principals).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Claims holds every claim of the token, as decoded from JSON
	// (string, float64, bool, []any, map[string]any, nil). Read-only.
	Claims map[string]any `json:"claims,omitempty"`
}

// Key returns the stable key that scopes the principal's state: artifacts,
// rate-limit windows, idempotency records and approvals. It is
// "jwt:<issuer name>:<sub>" for a token's principal and "local:<sub>" for
// the local principal; issuer names cannot hold ':', so keys of different
// issuers never collide. The key does not change when a principal presents
// a new token. The zero Principal has the key "".
func (p Principal) Key() string {
	switch {
	case p.Sub == "":
		return ""
	case p.Issuer == LocalIssuer || p.Issuer == "":
		return "local:" + p.Sub
	default:
		return "jwt:" + p.Issuer + ":" + p.Sub
	}
}

// IsZero reports whether p is the zero Principal (no one).
func (p Principal) IsZero() bool { return p.Sub == "" }

// Claim returns the claim named name, or nil.
func (p Principal) Claim(name string) any { return p.Claims[name] }

// Clone returns a copy of p with its own (shallow) copy of Claims.
func (p Principal) Clone() Principal {
	p.Claims = maps.Clone(p.Claims)
	return p
}

type ctxKey struct{}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal carried by ctx and whether there is
// one.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}
