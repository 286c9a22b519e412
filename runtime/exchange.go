package runtime

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/tokenexchange"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// errNotSent marks a failure that happened before a call left quiver (a
// token exchange that failed): the call certainly had no effect.
var errNotSent = errors.New("the call was not sent upstream")

// exchangeConn is a live upstream whose credential is exchanged per caller
// (RFC 8693, spec 001 MUST 5). Before each call it exchanges the caller's
// verified token (from the context) for a token bound to the upstream's
// audience, and hands only that token to the upstream client through the
// call's context (upstream.WithBearer): the HTTP client is shared by every
// caller, so nothing caller-bound is kept in it. Listings use the
// upstream client's own credential (Spec.Bearer: the gateway token's
// exchange, when configured).
type exchangeConn struct {
	liveConn
	ex *tokenexchange.Exchanger
}

// bind returns ctx carrying the exchanged token for this upstream, or the
// AUTH_FAILED error of a failed exchange.
func (x exchangeConn) bind(ctx context.Context) (context.Context, error) {
	p := principalOf(ctx)
	sub := identity.SubjectTokenFromContext(ctx)
	if p.IsZero() || sub == nil {
		return nil, newError(CodeAuthFailed, "token exchange needs an authenticated caller").withCause(errNotSent)
	}
	tok, err := x.ex.ExchangeFor(ctx, tokenexchange.Owner{Key: p.Key(), JTI: p.JTI}, sub.Reveal(), p.ExpiresAt)
	if err != nil {
		return nil, newError(CodeAuthFailed, "%s", exchangeMessage(err)).withCause(errors.Join(errNotSent, err))
	}
	return upstream.WithBearer(ctx, x.name(), tok), nil
}

// exchangeMessage is the one-line message of a failed exchange: the
// exchanger's errors carry no token and are one line already.
func exchangeMessage(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "token exchange did not complete"
	}
	return sanitize(err.Error())
}

func (x exchangeConn) callTool(ctx context.Context, it *catalog.Item, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, err := x.bind(ctx)
	if err != nil {
		return nil, err
	}
	return x.liveConn.callTool(ctx, it, args)
}

func (x exchangeConn) readResource(ctx context.Context, it *catalog.Item) (*mcp.ReadResourceResult, error) {
	ctx, err := x.bind(ctx)
	if err != nil {
		return nil, err
	}
	return x.liveConn.readResource(ctx, it)
}

func (x exchangeConn) getPrompt(ctx context.Context, it *catalog.Item, args map[string]string) (*mcp.GetPromptResult, error) {
	ctx, err := x.bind(ctx)
	if err != nil {
		return nil, err
	}
	return x.liveConn.getPrompt(ctx, it, args)
}

func (x exchangeConn) complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	ctx, err := x.bind(ctx)
	if err != nil {
		return nil, err
	}
	return x.liveConn.complete(ctx, p)
}

// forgetExchanged drops the cached exchanged tokens of a revoked principal
// (by subject or key) or token (by jti) from every exchanger: on the
// shared KV, for every replica at once. A failure is logged; the revoked
// are refused before any exchange anyway, so a token left behind is only
// reused after the revocation is lifted.
func (r *Runtime) forgetExchanged(ctx context.Context, kind policy.RevocationKind, id string) {
	for _, e := range r.upstreams() {
		xc, ok := e.conn.(*exchangeConn)
		if !ok {
			continue
		}
		x := xc.ex
		var err error
		switch kind {
		case policy.RevokedPrincipal:
			_, err = x.ForgetPrincipal(ctx, id)
		case policy.RevokedToken:
			_, err = x.ForgetToken(ctx, id)
		}
		if err != nil {
			r.log.Warn("dropping the revoked's exchanged tokens failed; they expire on their own", "audience", x.Audience(), "err", err)
		}
	}
}
