package identity

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// TokenInfoKey is the key under which the principal is stored in the
// go-sdk's auth.TokenInfo.Extra; use [FromTokenInfo] to read it.
const TokenInfoKey = "quiver.principal"

// MiddlewareOptions configure [Verifier.Middleware].
type MiddlewareOptions struct {
	// Realm of the challenge (default: the Verifier's realm).
	Realm string
	// ResourceMetadataURL, when set, is announced in the challenge
	// (RFC 9728) so OAuth clients can discover the authorization server.
	ResourceMetadataURL string
	// OnDeny, when set, is called for every refused request with one of
	// the Reason* codes, before the 401 is written; the runtime writes a
	// receipt there. It must not write to the response.
	OnDeny func(r *http.Request, reason string)
	// OnAllow, when set, is called with the principal of every
	// authenticated request before the wrapped handler runs; the runtime
	// remembers it for the receipt of a request the handler then refuses.
	OnAllow func(r *http.Request, p Principal)
}

// Middleware returns HTTP middleware that authenticates every request
// before the wrapped handler sees it:
//
//   - a request without exactly one well-formed "Authorization: Bearer
//     <token>" header, or whose token fails [Verifier.Verify], gets 401
//     with "WWW-Authenticate: Bearer realm=..., error="invalid_token",
//     error_description=<reason>" and a one-line JSON body
//     {"error":"invalid_token","error_description":<reason>};
//   - an authenticated request reaches the handler with its principal in
//     the context ([FromContext]) and in the go-sdk's auth.TokenInfo
//     ([FromTokenInfo]; the MCP streamable handler hands it to every
//     request of the session as RequestExtra.TokenInfo and binds the
//     session to [Principal.Key]), and without its Authorization header,
//     so nothing downstream can forward the client's token. The verified
//     token is kept only as a redacting [SubjectToken] in the context
//     ([SubjectTokenFromContext]) and in the TokenInfo
//     ([SubjectTokenFromTokenInfo]), for RFC 8693 token exchange.
func (v *Verifier) Middleware(o MiddlewareOptions) func(http.Handler) http.Handler {
	realm := o.Realm
	if realm == "" {
		realm = v.cfg.Realm
	}
	challenge := func(reason string) string {
		var b strings.Builder
		b.WriteString("Bearer realm=")
		b.WriteString(strconv.Quote(realm))
		if o.ResourceMetadataURL != "" {
			b.WriteString(", resource_metadata=")
			b.WriteString(strconv.Quote(o.ResourceMetadataURL))
		}
		b.WriteString(`, error="invalid_token", error_description=`)
		b.WriteString(strconv.Quote(reason))
		return b.String()
	}
	// go-sdk's bearer middleware is what puts TokenInfo where the MCP
	// handler reads it (its context key is unexported). It runs after the
	// verification here and only converts the principal. Expiry was
	// checked already, against the Verifier's clock and skew: the
	// TokenInfo handed to it carries no expiration, so that its own
	// wall-clock check cannot disagree.
	sdkOpts := &auth.RequireBearerTokenOptions{AllowMissingExpiration: true}
	toTokenInfo := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p, ok := FromContext(ctx)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		ti := TokenInfo(p)
		ti.Expiration = time.Time{}
		if t := SubjectTokenFromContext(ctx); t != nil {
			ti.Extra[SubjectTokenKey] = t
		}
		return ti, nil
	}
	return func(next http.Handler) http.Handler {
		strip := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// r's header map is the private copy made by Clone below, so
			// deleting from it leaves the caller's request alone.
			r.Header.Del("Authorization")
			next.ServeHTTP(w, r)
		})
		inner := auth.RequireBearerToken(toTokenInfo, sdkOpts)(strip)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, err := v.bearer(r)
			var p Principal
			if err == nil {
				p, err = v.Verify(r.Context(), token)
			}
			if err != nil {
				reason := Reason(err)
				if o.OnDeny != nil {
					o.OnDeny(r, reason)
				}
				if reason == ReasonStateUnavailable {
					writeUnavailable(w)
					return
				}
				writeUnauthorized(w, challenge(reason), reason)
				return
			}
			if o.OnAllow != nil {
				o.OnAllow(r, p)
			}
			ctx := WithSubjectToken(WithPrincipal(r.Context(), p), NewSubjectToken(token))
			inner.ServeHTTP(w, r.Clone(ctx))
		})
	}
}

// bearer extracts the token of the request's one Authorization header.
func (v *Verifier) bearer(r *http.Request) (string, error) {
	vals := r.Header.Values("Authorization")
	switch {
	case len(vals) == 0:
		return "", tokenErr(ReasonMissingToken, ErrNoToken)
	case len(vals) > 1:
		return "", tokenErr(ReasonMalformedHeader, ErrMalformedHeader)
	}
	h := vals[0]
	if len(h) > v.maxBytes+64 {
		return "", tokenErr(ReasonTooLarge, ErrTokenTooLarge)
	}
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", tokenErr(ReasonMalformedHeader, ErrMalformedHeader)
	}
	token := strings.TrimLeft(rest, " ")
	if token == "" {
		return "", tokenErr(ReasonMissingToken, ErrNoToken)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", tokenErr(ReasonMalformedHeader, ErrMalformedHeader)
	}
	return token, nil
}

// writeUnauthorized writes the 401 answer.
func writeUnauthorized(w http.ResponseWriter, challenge, reason string) {
	h := w.Header()
	h.Set("WWW-Authenticate", challenge)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	body, _ := json.Marshal(map[string]string{"error": "invalid_token", "error_description": reason})
	_, _ = w.Write(append(body, '\n'))
}

// writeUnavailable writes the 503 answer of a request whose token could
// not be checked against the revocation state: the client should retry,
// not drop its credentials.
func writeUnavailable(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"error":"STATE_UNAVAILABLE","error_description":"the state backend is unavailable; retry later"}` + "\n"))
}

// TokenInfo converts p into the go-sdk's auth.TokenInfo: UserID is
// p.Key() (the streamable handler refuses a session's requests from
// another user), Scopes come from the scope (space-separated) or scp
// claim, and Extra[TokenInfoKey] holds p.
func TokenInfo(p Principal) *auth.TokenInfo {
	ti := &auth.TokenInfo{UserID: p.Key(), Expiration: p.ExpiresAt, Extra: map[string]any{TokenInfoKey: p}}
	switch s := p.Claims["scope"].(type) {
	case string:
		ti.Scopes = strings.Fields(s)
	}
	if ti.Scopes == nil {
		if list, ok := p.Claims["scp"].([]any); ok {
			for _, x := range list {
				if s, ok := x.(string); ok {
					ti.Scopes = append(ti.Scopes, s)
				}
			}
		}
	}
	return ti
}

// FromTokenInfo returns the principal that [Verifier.Middleware] stored in
// ti. In an MCP tool handler: FromTokenInfo(req.Extra.TokenInfo) (with
// req.Extra nil-checked; stdio requests have no Extra).
func FromTokenInfo(ti *auth.TokenInfo) (Principal, bool) {
	if ti == nil {
		return Principal{}, false
	}
	p, ok := ti.Extra[TokenInfoKey].(Principal)
	return p, ok
}
