//lint:file-ignore SA1019 logging is deprecated in protocol 2026-07-28 only; quiver carries the client's log level for the upstreams that still log.

package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// caller is the principal of one request and the receipt being built for
// it. The receiving middleware (record.go) makes it and puts it in the
// request's context; the handlers only add to its receipt.
type caller struct {
	// p is the principal: a verified JWT principal, the local principal
	// (stdio), or zero for an anonymous HTTP session.
	p identity.Principal
	// jwt is true for a verified token's principal.
	jwt bool
	// subject is the verified token itself (redacting), kept only for
	// RFC 8693 token exchange; nil for stdio and anonymous callers.
	subject *identity.SubjectToken
	ss      *mcp.ServerSession
	// local is true when p is the local principal (stdio, in-process).
	local bool
	// version is the request's protocol revision; sessionless is true at
	// a revision without sessions (each HTTP request is its own
	// ephemeral session then, and ss stands for that request only).
	version     string
	sessionless bool
	// capsFrom says which client capabilities the request announced (per
	// request at 2026-07-28, the session's before); read them with
	// clientCaps. Only an upstream's input request needs them, and at
	// 2026-07-28 the go-sdk decodes them from _meta on every call, so they
	// are not decoded up front.
	capsFrom capable
	// inputs and reqState are a sessionless caller's answers to the
	// input requests of an earlier round and the request state quiver
	// sealed for it (a multi-round-trip retry); both empty on a first try.
	inputs   mcp.InputResponseMap
	reqState string
	// capsMeta is the client's capabilities as its request's _meta
	// carried them (sessionless requests only): what quiver passes on to
	// the upstream, so that it asks only for input the client can give.
	capsMeta any
	// logLevel is the log level a sessionless request's _meta asked for
	// ("" for none: no log messages).
	logLevel mcp.LoggingLevel
	// offerTask is set when quiver offers the tasks extension to the
	// upstream for this call (tasks.go); task is the upstream's task
	// when it answered with one, and answer what the client gets
	// instead of the tool result then.
	offerTask bool
	task      *upstream.Task
	answer    mcp.Result
	// resumed is what reqState opened to, once opened.
	resumed *resumption
	// anon is the owner key of an anonymous request without a session,
	// made on first use.
	anon string
	// progress is the request's progress token (nil when it has none).
	progress any
	// what names the request in metrics and logs: the MCP method, or for
	// tools/call the meta-tool, "direct" or "stripped" (set by the tool's
	// handler; an unknown tool stays "tools/call").
	what string
	rc   receipts.Receipt
	// decided is set once the pipeline recorded the decision in rc.
	decided bool
	// keepAllow keeps an allowed request's decision when it fails (an
	// operator's action).
	keepAllow bool
	// reasons are the reason codes of a refusal beyond its error code
	// (an argument guard's, a relay policy's); a deny receipt lists them
	// after the error code.
	reasons []string
}

type callerKey struct{}

// callerOf returns the caller of the request ctx belongs to (nil outside
// a request, e.g. a catalog rebuild).
func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// newCaller resolves who made a request: the principal the identity
// middleware put in the session's token info (HTTP with auth), the local
// principal (stdio and in-process sessions, which carry no HTTP header), or
// no one (HTTP without auth: the session, if any, is its own anonymous
// principal).
func newCaller(local identity.Principal, extra *mcp.RequestExtra, ss *mcp.ServerSession) *caller {
	c := &caller{ss: ss}
	if extra != nil && extra.TokenInfo != nil {
		if p, ok := identity.FromTokenInfo(extra.TokenInfo); ok {
			c.p, c.jwt = p, true
			c.subject = identity.SubjectTokenFromTokenInfo(extra.TokenInfo)
			return c
		}
	}
	overHTTP := extra != nil && extra.Header != nil
	if !overHTTP && (ss == nil || ss.ID() == "") {
		c.p, c.local = local, true
	}
	return c
}

// capable is what the go-sdk's server requests say of the client's
// capabilities.
type capable interface {
	ClientCapabilities() *mcp.ClientCapabilities
}

// setVersion records the request's protocol revision, the capabilities
// the client announced, and a multi-round-trip retry's answers and state.
func (c *caller) setVersion(req mcp.Request) {
	c.version = protocol.VersionOf(req)
	c.sessionless = c.version >= protocol.Sessionless
	if v, ok := req.(capable); ok {
		c.capsFrom = v
	}
	if !c.sessionless {
		// Before 2026-07-28 there are no retries: the fields are not
		// the protocol's, and are ignored.
		return
	}
	// A request without params (a ping) holds a typed nil.
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
		if m := p.GetMeta(); m != nil {
			c.capsMeta = m[mcp.MetaKeyClientCapabilities]
			if lvl, ok := m[mcp.MetaKeyLogLevel].(string); ok {
				if _, known := levelRank[mcp.LoggingLevel(lvl)]; known {
					c.logLevel = mcp.LoggingLevel(lvl)
				}
			}
		}
	}
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil {
			c.inputs, c.reqState = r.Params.InputResponses, r.Params.RequestState
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil {
			c.inputs, c.reqState = r.Params.InputResponses, r.Params.RequestState
		}
	case *mcp.ReadResourceRequest:
		if r.Params != nil {
			c.inputs, c.reqState = r.Params.InputResponses, r.Params.RequestState
		}
	}
}

// clientCaps returns the client capabilities the request announced (nil
// when it announced none or is not a server request).
func (c *caller) clientCaps() *mcp.ClientCapabilities {
	if c == nil || c.capsFrom == nil {
		return nil
	}
	return c.capsFrom.ClientCapabilities()
}

// stateKey is the principal a sealed request state is bound to: a
// verified principal, the local one, or every anonymous caller alike (an
// anonymous caller has nothing stable to bind to; the state itself is the
// secret, and it opens once).
func (c *caller) stateKey() string {
	switch {
	case c == nil:
		return ""
	case c.jwt:
		return "jwt:" + c.p.Key()
	case c.local:
		return "local:" + c.p.Sub
	}
	return "anonymous"
}

// withCaller attaches c to ctx.
func withCaller(ctx context.Context, c *caller) context.Context {
	ctx = context.WithValue(ctx, callerKey{}, c)
	if !c.p.IsZero() {
		ctx = identity.WithPrincipal(ctx, c.p)
		ctx = identity.WithSubjectToken(ctx, c.subject)
	}
	return ctx
}

// principalOf returns the caller's principal (zero when anonymous).
func principalOf(ctx context.Context) identity.Principal {
	if c := callerOf(ctx); c != nil {
		return c.p
	}
	return identity.Principal{}
}

// begin starts the caller's receipt of request method.
func (c *caller) begin(method string, args json.RawMessage, now time.Time) {
	c.what = method
	c.rc = receipts.New(method, now)
	if !c.p.IsZero() {
		c.rc.Principal = receipts.PrincipalOf(c.p)
	}
	if c.ss != nil {
		c.rc.MCP.SessionID = c.ss.ID()
	}
	if args == nil {
		return
	}
	if h, n, err := receipts.ArgsHash(args); err == nil {
		c.rc.Request.ArgsHash, c.rc.Request.SizeBytesIn = h, n
	} else {
		c.rc.Request.SizeBytesIn = int64(len(args))
	}
}

// name sets what a tool call is (a meta-tool, "direct", "stripped"):
// its receipt's method becomes tools/call:<what>.
func (c *caller) name(what string) {
	if c == nil {
		return
	}
	c.what = what
	c.rc.MCP.Method = "tools/call:" + what
}

// anonymousOwner is the owner key of an anonymous caller without a
// session: unguessable and this request's alone, so nothing it stores can
// be read by another request.
func (c *caller) anonymousOwner() string {
	if c.anon == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		c.anon = "anonymous:" + hex.EncodeToString(b[:])
	}
	return c.anon
}
