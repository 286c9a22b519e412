package protocol

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sessionless is the first MCP revision without sessions: its requests
// carry their revision and client capabilities in _meta, and over HTTP the
// go-sdk serves them only with a stateless handler.
const Sessionless = "2026-07-28"

// metaVersionKey is the _meta key of a request's protocol revision.
const metaVersionKey = "io.modelcontextprotocol/protocolVersion"

// RouterOptions configure NewRouter. They apply to both handlers.
type RouterOptions struct {
	// DisableLocalhostProtection turns off the go-sdk's DNS-rebinding
	// rule (a configured host allow-list replaces it).
	DisableLocalhostProtection bool
	// SessionTimeout closes idle sessions of the stateful handler.
	SessionTimeout time.Duration
	// MaxRequestBodyBytes bounds a request body (default the go-sdk's 4 MiB).
	MaxRequestBodyBytes int64
	// Stateful, when set, wraps the handler of sessions (everything
	// that is not sessionless), e.g. to bound the sessions it opens.
	Stateful func(http.Handler) http.Handler
	// Stateless, when set, wraps the handler of sessionless requests.
	Stateless func(http.Handler) http.Handler
}

// NewRouter serves every revision of MCP over streamable HTTP on one
// endpoint, with one server: a request at a sessionless revision (its
// Mcp-Protocol-Version header, or, on a POST with neither that header nor
// a session, the revision in its _meta) goes to a stateless go-sdk
// handler; everything else, including every request of a session, to a
// stateful one.
func NewRouter(srv *mcp.Server, o RouterOptions) http.Handler {
	get := func(*http.Request) *mcp.Server { return srv }
	limit := o.MaxRequestBodyBytes
	if limit == 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	var stateful http.Handler = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		DisableLocalhostProtection: o.DisableLocalhostProtection, SessionTimeout: o.SessionTimeout, MaxRequestBodyBytes: limit})
	if o.Stateful != nil {
		stateful = o.Stateful(stateful)
	}
	var stateless http.Handler = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		DisableLocalhostProtection: o.DisableLocalhostProtection, MaxRequestBodyBytes: limit, Stateless: true,
		// At a sessionless revision the POST is the request's whole life:
		// a client that goes away cancels it.
		PropagateRequestCancellation: true})
	if o.Stateless != nil {
		stateless = o.Stateless(stateless)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if sessionless(req, limit) {
			stateless.ServeHTTP(w, req)
			return
		}
		stateful.ServeHTTP(w, req)
	})
}

// sessionless reports whether req belongs to the stateless handler. It
// reads the body only of a POST without a revision header and without a
// session (a client's first request), and puts it back.
func sessionless(req *http.Request, limit int64) bool {
	if v := req.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= Sessionless
	}
	if req.Method != http.MethodPost || req.Header.Get("Mcp-Session-Id") != "" || req.Body == nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	req.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
	if err != nil || int64(len(body)) > limit {
		// The handler reads the rest and refuses it itself.
		return false
	}
	return MetaVersion(body) >= Sessionless
}

// MetaVersion returns the protocol revision a JSON-RPC request names in
// its _meta, or "" (a batch, a request without one, or not JSON).
func MetaVersion(body []byte) string {
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	var v string
	if json.Unmarshal(m.Params.Meta[metaVersionKey], &v) != nil {
		return ""
	}
	return v
}
