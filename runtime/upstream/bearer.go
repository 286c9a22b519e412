package upstream

import (
	"context"
	"fmt"
)

// bearerKey carries a per-call bearer token; see WithBearer.
type bearerKey struct{}

// callBearer is a token bound to one upstream.
type callBearer struct {
	upstream string
	token    string
}

// WithBearer returns a copy of ctx that makes the Client of the upstream
// named upstream send "Authorization: Bearer token" on the HTTP requests of
// calls made with it, to the upstream's own origin only, in place of any
// configured Authorization header. The Client's HTTP connection is shared
// by every caller, so a caller-bound credential (an RFC 8693 exchanged
// token) travels with the call's context rather than in Spec.Headers. The
// token is used by no other upstream.
func WithBearer(ctx context.Context, upstream, token string) context.Context {
	return context.WithValue(ctx, bearerKey{}, callBearer{upstream: upstream, token: token})
}

// bearerFrom returns the token WithBearer put into ctx for upstream.
func bearerFrom(ctx context.Context, upstream string) (string, bool) {
	b, ok := ctx.Value(bearerKey{}).(callBearer)
	if !ok || b.upstream != upstream || b.token == "" {
		return "", false
	}
	return b.token, true
}

// authorization returns the Authorization value of a request to the
// upstream's origin made with ctx: the call's WithBearer token, else the
// token of Spec.Bearer (requests no caller is bound to: the handshake,
// listings, pings, the event stream), else "" (keep the configured
// headers).
func (t *headerTransport) authorization(ctx context.Context) (string, error) {
	if tok, ok := bearerFrom(ctx, t.name); ok {
		return "Bearer " + tok, nil
	}
	if t.bearer == nil {
		return "", nil
	}
	tok, err := t.bearer(ctx)
	if err != nil {
		return "", fmt.Errorf("upstream %q: credential for a request without a caller: %w", t.name, err)
	}
	if tok == "" {
		return "", nil
	}
	return "Bearer " + tok, nil
}
