package runtime

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/identity"
)

// The go-sdk refuses some requests before any middleware sees them: an
// unknown method, a request before initialize, parameters that do not
// decode, and over HTTP a missing or unknown session, a bad Accept header
// or protocol version header. The catchers here see the requests go in and
// the answers come out, at the connection (stdio) or the HTTP handler, and
// write the receipt of a request the receiving middleware never claimed.

// tagHeader carries the tag that lets the receiving middleware claim a
// request a catcher saw. The catcher sets it on the request's header map,
// which the go-sdk hands to the middleware as RequestExtra.Header; a
// client's own value is overwritten.
const tagHeader = "Quiver-Request-Tag"

// requestTags maps the requests in flight to their trackers: over HTTP by
// a tag in the header map, at a connection by the request's extra itself
// (a stdio request carries no header, which is how the caller knows it is
// local).
type requestTags struct {
	seq     atomic.Uint64
	live    sync.Map // tag -> *tracked
	byExtra sync.Map // *mcp.RequestExtra -> *tracked
}

// tracked counts how many of a tagged request's calls the middleware
// claimed, and holds the principal the identity middleware verified.
type tracked struct {
	claimed atomic.Int32
	p       atomic.Pointer[identity.Principal]
}

// open tags h and returns the tracker and a function that forgets it.
func (t *requestTags) open(h http.Header) (*tracked, func()) {
	tag := strconv.FormatUint(t.seq.Add(1), 36)
	h.Set(tagHeader, tag)
	tr := &tracked{}
	t.live.Store(tag, tr)
	return tr, func() { t.live.Delete(tag) }
}

// openExtra tracks the request whose extra is x and returns a function
// that forgets it.
func (t *requestTags) openExtra(x *mcp.RequestExtra) (*tracked, func()) {
	tr := &tracked{}
	t.byExtra.Store(x, tr)
	return tr, func() { t.byExtra.Delete(x) }
}

// claim marks the request extra belongs to as received by the middleware.
func (t *requestTags) claim(extra *mcp.RequestExtra) {
	if extra == nil {
		return
	}
	if v, ok := t.byExtra.Load(extra); ok {
		v.(*tracked).claimed.Add(1)
		return
	}
	t.claimHeader(extra.Header)
}

// claimHeader marks the request whose header map h is as receipted.
func (t *requestTags) claimHeader(h http.Header) {
	if h == nil {
		return
	}
	tag := h.Get(tagHeader)
	if tag == "" {
		return
	}
	if v, ok := t.live.Load(tag); ok {
		v.(*tracked).claimed.Add(1)
	}
}

// authenticated records the verified principal of the request whose
// header map h is (the identity middleware's OnAllow).
func (t *requestTags) authenticated(h http.Header, p identity.Principal) {
	if v, ok := t.live.Load(h.Get(tagHeader)); ok {
		v.(*tracked).p.Store(&p)
	}
}

// refused writes the receipt of a request the go-sdk refused before
// dispatch, made by c: the method as the client named it and the refusal
// as a protocol error. Its metric counts under "refused", whatever the
// client named.
func (rec *recorder) refused(c *caller, sessionID, method string, sizeIn int64, e *Error, start time.Time) {
	c.begin(receiptMethod(method), nil, start)
	c.what = "refused"
	c.rc.MCP.SessionID = sessionID
	c.rc.Request.SizeBytesIn = sizeIn
	rec.write(c, nil, e, time.Since(start))
}

// methodShape is what a receipt keeps of a method name a client sent.
var methodShape = regexp.MustCompile(`^[A-Za-z0-9_./:-]{1,96}$`)

// receiptMethod is the receipt's method of a refused request: the
// method as sent when it looks like one, else "invalid".
func receiptMethod(m string) string {
	switch {
	case m == "":
		return "http"
	case methodShape.MatchString(m):
		return m
	}
	return "invalid"
}

// recordingTransport wraps a transport (stdio) so that every call it
// reads is tagged and every answer the middleware did not claim is
// receipted.
type recordingTransport struct {
	mcp.Transport
	rec *recorder
}

// Connect implements mcp.Transport.
func (t recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Connection: conn, rec: t.rec, pending: map[jsonrpc.ID]*pendingCall{}}, nil
}

// recordingConn is one connection of a recordingTransport.
type recordingConn struct {
	mcp.Connection
	rec *recorder

	mu      sync.Mutex
	pending map[jsonrpc.ID]*pendingCall
}

// pendingCall is a call read and not yet answered.
type pendingCall struct {
	t      *tracked
	forget func()
	method string
	size   int64
	start  time.Time
}

// maxPending bounds the calls a connection tracks at once; past it, calls
// are not tracked (the middleware still receipts every call it receives).
const maxPending = 4096

// Read implements mcp.Connection.
func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() {
		return msg, err
	}
	extra, _ := req.Extra.(*mcp.RequestExtra)
	if extra == nil {
		extra = &mcp.RequestExtra{}
		req.Extra = extra
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.pending[req.ID]; dup || len(c.pending) >= maxPending {
		return msg, nil
	}
	t, forget := c.rec.tags.openExtra(extra)
	c.pending[req.ID] = &pendingCall{t: t, forget: forget, method: req.Method, size: int64(len(req.Params)), start: time.Now()}
	return msg, nil
}

// Write implements mcp.Connection.
func (c *recordingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		p := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if p != nil {
			p.forget()
			if p.t.claimed.Load() == 0 {
				e := &Error{Code: CodeProtocolError, Message: "answered without dispatch", protocol: true}
				if resp.Error != nil {
					e = protocolError(resp.Error)
				}
				c.rec.refused(&caller{p: c.rec.local}, "", p.method, p.size, e, p.start)
			}
		}
	}
	return c.Connection.Write(ctx, msg)
}

// Close implements mcp.Connection: calls never answered are forgotten.
func (c *recordingConn) Close() error {
	c.mu.Lock()
	for id, p := range c.pending {
		p.forget()
		delete(c.pending, id)
	}
	c.mu.Unlock()
	return c.Connection.Close()
}

// catchRefusals wraps the MCP HTTP handler: a POST is tagged, and when the
// answer refuses it (an HTTP error, or a JSON-RPC error the middleware
// never saw) its receipt is written here.
func (rec *recorder) catchRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		t, forget := rec.tags.open(req.Header)
		defer forget()
		var head headBuffer
		if req.Body != nil {
			req.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(req.Body, &head), req.Body}
		}
		cw := &capturingWriter{ResponseWriter: w}
		next.ServeHTTP(cw, req)
		if t.claimed.Load() > 0 || cw.status == http.StatusAccepted {
			return
		}
		e := cw.refusal()
		if e == nil {
			return
		}
		if head.n == 0 && req.Body != nil {
			// Refused before the body was read (no session, a foreign
			// host): read enough of it to name the method.
			_, _ = io.CopyN(io.Discard, req.Body, int64(len(head.b)))
		}
		// Over HTTP a caller is a verified token's principal or anonymous.
		c := &caller{}
		if p := t.p.Load(); p != nil {
			c.p, c.jwt = *p, true
		}
		size := req.ContentLength
		if size < 0 {
			size = int64(head.n)
		}
		rec.refused(c, req.Header.Get("Mcp-Session-Id"), methodIn(head.b[:min(head.n, len(head.b))], req.Method), size, e, start)
	})
}

// headBuffer keeps the first bytes of a request body (enough to name its
// method) and counts the rest.
type headBuffer struct {
	b [1024]byte
	n int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if h.n < len(h.b) {
		copy(h.b[h.n:], p)
	}
	h.n += len(p)
	return len(p), nil
}

var methodField = regexp.MustCompile(`"method"\s*:\s*"([^"\\]{0,128})"`)

// methodIn names the JSON-RPC method of a request body's head, or the HTTP
// method for a request without one (GET, DELETE).
func methodIn(head []byte, httpMethod string) string {
	if m := methodField.FindSubmatch(head); m != nil {
		return string(m[1])
	}
	if httpMethod != http.MethodPost {
		return "http"
	}
	return ""
}

// capturingWriter records the status and the first bytes of an answer,
// enough to tell a refusal and its code.
type capturingWriter struct {
	http.ResponseWriter
	status int
	head   [512]byte
	n      int
}

func (w *capturingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *capturingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.n < len(w.head) {
		w.n += copy(w.head[w.n:], p)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer's flusher.
func (w *capturingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher.
func (w *capturingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

var rpcErrorCode = regexp.MustCompile(`"error"\s*:\s*\{\s*"code"\s*:\s*(-?[0-9]{1,9})`)

// refusal is the error of a refused answer, or nil when the answer is no
// refusal (a stream opened, a session deleted).
func (w *capturingWriter) refusal() *Error {
	head := w.head[:w.n]
	if m := rpcErrorCode.FindSubmatch(head); m != nil {
		code, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return &Error{Code: protocolCode(code), Message: sanitize(string(head)), protocol: true}
	}
	if w.status < 400 {
		return nil
	}
	code := CodeProtocolError
	switch w.status {
	case http.StatusNotFound:
		code = CodeSessionNotFound
	case http.StatusForbidden:
		code = CodeForbidden
	}
	msg := strconv.Itoa(w.status) + " " + string(bytes.TrimSpace(head))
	return &Error{Code: code, Message: sanitize(msg), protocol: true}
}
