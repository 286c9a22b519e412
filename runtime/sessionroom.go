package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/sessionlimit"
)

// sessionRoom wraps the handler of MCP sessions (2025-11-25 and older)
// with the listener's session limits (listen.sessions): a request that
// would open one session too many is refused, 429 for the caller's own
// limit and 503 for the listener's, with a receipt.
func (r *Runtime) sessionRoom(next http.Handler) http.Handler {
	return r.sessionLimit.Handler(next, sessionlimit.HandlerOptions{
		Key: sessionOwner,
		Find: func(id string) (sessionlimit.Session, bool) {
			for ss := range r.server.Sessions() {
				if ss.ID() == id {
					return ss, true
				}
			}
			return nil, false
		},
		Refuse: r.refuseSession,
	})
}

// requestRoom wraps the handler of sessionless requests (2026-07-28)
// with the same limits: a request holds a slot while it is served.
func (r *Runtime) requestRoom(next http.Handler) http.Handler {
	return r.sessionLimit.InFlight(next, sessionlimit.HandlerOptions{Key: sessionOwner, Refuse: r.refuseSession})
}

// sessionOwner is whose sessions a request's counts against: a verified
// token's principal, else (anonymous HTTP, where each session is its own
// principal) the remote address, so that one client cannot take every
// slot.
func sessionOwner(req *http.Request) string {
	if p, ok := identity.FromTokenInfo(auth.TokenInfoFromContext(req.Context())); ok {
		return "principal:" + p.Key()
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	return "addr:" + host
}

// refuseSession answers a request refused for want of session room: an
// HTTP error with Retry-After whose body is a JSON-RPC error naming the
// code (what an MCP client shows), and a deny receipt.
func (r *Runtime) refuseSession(w http.ResponseWriter, req *http.Request, err error) {
	code, status, msg := CodeSessionCapacityExceeded, http.StatusServiceUnavailable, "the gateway holds as many sessions and requests as it may; retry later"
	if errors.Is(err, sessionlimit.ErrPrincipal) {
		code, status, msg = CodeSessionLimitExceeded, http.StatusTooManyRequests,
			fmt.Sprintf("this caller holds %d sessions or requests in flight, its maximum; close one or retry later", r.sessionLimit.Limits().PerPrincipal)
	}
	r.rec.tags.claimHeader(req.Header)
	c := &caller{}
	if p, ok := identity.FromTokenInfo(auth.TokenInfoFromContext(req.Context())); ok {
		c.p, c.jwt = p, true
	}
	c.begin("http", nil, time.Now())
	c.what = "refused"
	if req.ContentLength > 0 {
		c.rc.Request.SizeBytesIn = req.ContentLength
	}
	c.rc.Decision, c.decided = receipts.Decision{Result: "deny", PolicyID: "sessions", ReasonCodes: []string{code}}, true
	c.rc.Outcome.Message = req.Method + " " + req.URL.Path
	r.rec.write(c, nil, &Error{Code: code, Message: msg}, 0)

	w.Header().Set("Retry-After", strconv.Itoa(r.sessionRetryAfter()))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": &jsonrpc.Error{Code: codes.JSONRPC(code), Message: code + ": " + msg}})
	_, _ = w.Write(body)
}

// sessionRetryAfter is the Retry-After of a refusal, in seconds: an idle
// session is reaped within the idle timeout, capped at a minute.
func (r *Runtime) sessionRetryAfter() int {
	d := time.Duration(r.cfg.Listen.SessionIdleTimeout)
	if d <= 0 || d > time.Minute {
		d = time.Minute
	}
	return max(int(d/time.Second), 1)
}
