package identity

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// SubjectTokenKey is the key under which [Verifier.Middleware] stores the
// caller's verified token in the go-sdk's auth.TokenInfo.Extra; use
// [SubjectTokenFromTokenInfo] to read it.
const SubjectTokenKey = "quiver.subject_token"

// redacted is what a SubjectToken shows when printed, logged or encoded.
const redacted = "[REDACTED]"

// SubjectToken is a caller's verified bearer token, kept only so that it
// can be exchanged for an upstream-bound token (RFC 8693, spec 001 MUST 5).
// It is never forwarded: formatting, logging or JSON-encoding it shows
// "[REDACTED]", and only [SubjectToken.Reveal] gives the value. Use it by
// pointer; the nil pointer is no token.
type SubjectToken struct {
	v string
}

// NewSubjectToken wraps a verified token; "" gives nil.
func NewSubjectToken(token string) *SubjectToken {
	if token == "" {
		return nil
	}
	return &SubjectToken{v: token}
}

// Reveal returns the token ("" for nil). Only a token exchange may use it.
func (t *SubjectToken) Reveal() string {
	if t == nil {
		return ""
	}
	return t.v
}

// String implements fmt.Stringer without showing the token.
func (t *SubjectToken) String() string { return redacted }

// GoString implements fmt.GoStringer without showing the token.
func (t *SubjectToken) GoString() string { return redacted }

// LogValue implements slog.LogValuer without showing the token.
func (t *SubjectToken) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON encodes the token as "[REDACTED]".
func (t *SubjectToken) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText encodes the token as [REDACTED].
func (t *SubjectToken) MarshalText() ([]byte, error) { return []byte(redacted), nil }

type subjectKey struct{}

// WithSubjectToken returns a copy of ctx carrying t (ctx itself when t is
// nil).
func WithSubjectToken(ctx context.Context, t *SubjectToken) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, subjectKey{}, t)
}

// SubjectTokenFromContext returns the verified token carried by ctx, or
// nil.
func SubjectTokenFromContext(ctx context.Context) *SubjectToken {
	t, _ := ctx.Value(subjectKey{}).(*SubjectToken)
	return t
}

// SubjectTokenFromTokenInfo returns the verified token that
// [Verifier.Middleware] stored in ti, or nil.
func SubjectTokenFromTokenInfo(ti *auth.TokenInfo) *SubjectToken {
	if ti == nil {
		return nil
	}
	t, _ := ti.Extra[SubjectTokenKey].(*SubjectToken)
	return t
}
