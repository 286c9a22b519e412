package upstream

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerTransport adds the spec's headers, and the per-call bearer token of
// WithBearer (or Spec.Bearer's), to requests for the upstream's own origin
// (never to a redirect target or any other host), and records
// HTTP error statuses into the status probe carried by the request context.
type headerTransport struct {
	base    http.RoundTripper
	origin  string // scheme://host[:port] of the configured endpoint
	headers http.Header
	// name is the upstream's Spec.Name (the key of WithBearer tokens).
	name string
	// bearer is Spec.Bearer.
	bearer func(context.Context) (string, error)
	// deleteTimeout bounds the best-effort session-termination DELETE the
	// go-sdk sends on close (its own bound is 5 s, and a go-sdk server
	// answers it only after its in-flight handlers return).
	deleteTimeout time.Duration
	// count is called for every relayed notification read from an event
	// stream (see sseCounter).
	count func()
	// taskKey, when set, is the key under which the answer to a
	// tools/call POST is handed over when it is a task (see taskBody).
	taskKey string
}

// RoundTrip implements http.RoundTripper.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var cancel context.CancelFunc
	if req.Method == http.MethodDelete && t.deleteTimeout > 0 {
		var ctx context.Context
		ctx, cancel = context.WithTimeout(req.Context(), t.deleteTimeout)
		req = req.WithContext(ctx)
	}
	if name := taskName(req); name != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Mcp-Name", name)
	}
	if originOf(req.URL) == t.origin {
		authz, err := t.authorization(req.Context())
		if err != nil {
			if cancel != nil {
				cancel()
			}
			return nil, err
		}
		if len(t.headers) > 0 || authz != "" {
			req = req.Clone(req.Context()) // a RoundTripper must not modify its request
			for k, vs := range t.headers {
				req.Header.Del(k)
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			if authz != "" {
				req.Header.Set("Authorization", authz)
			}
		}
	}
	var resp *http.Response
	var err error
	if req.Method == http.MethodPost {
		resp, err = withDrainGrace(t.base, req)
	} else {
		resp, err = t.base.RoundTrip(req)
	}
	if err == nil && t.taskKey != "" && req.Method == http.MethodPost && req.Header.Get("Mcp-Method") == "tools/call" {
		resp.Body = taskBody(resp, t.taskKey)
	}
	if err == nil && t.count != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &sseCounter{ReadCloser: resp.Body, count: t.count}
	}
	if err == nil && resp.StatusCode >= 400 {
		if p := probeFrom(req.Context()); p != nil {
			p.record(resp)
		}
	}
	if cancel != nil {
		if err != nil {
			cancel()
		} else {
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		}
	}
	return resp, err
}

// cancelOnClose releases a request context when its response body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

// Close implements io.Closer.
func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func originOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// boundTransport makes the underlying transport's connection live as long
// as the session context rather than the (timeout-bounded) connect context:
// mcp.SSEClientTransport ties its event stream to the context given to
// Connect. If the connect context ends while the inner Connect is still
// running, the session context is cancelled to abort it.
type boundTransport struct {
	inner  mcp.Transport
	ctx    context.Context
	cancel context.CancelCauseFunc
	// received, when set, counts the notifications read (see
	// countingConn).
	received *atomic.Int64
	// taskKey, when set, is the key under which a task answer is handed
	// over (see taskConn).
	taskKey string
}

// countingConn counts the notifications read from a connection.
type countingConn struct {
	mcp.Connection
	received *atomic.Int64
}

// Read implements mcp.Connection.
func (c *countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.IsCall() && relayedNotifications[req.Method] {
		c.received.Add(1)
	}
	return msg, err
}

// Connect implements mcp.Transport.
func (t *boundTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stop := context.AfterFunc(ctx, func() { t.cancel(context.Cause(ctx)) })
	conn, err := t.inner.Connect(t.ctx)
	if err == nil && t.received != nil {
		conn = &countingConn{Connection: conn, received: t.received}
	}
	if err == nil && t.taskKey != "" {
		conn = &taskConn{Connection: conn, key: t.taskKey}
	}
	if !stop() {
		// ctx ended during Connect; t.ctx is cancelled.
		if conn != nil {
			_ = conn.Close()
		}
		if err == nil {
			err = context.Cause(ctx)
		}
		return nil, err
	}
	return conn, err
}

// maxStderrLine bounds one logged stderr line.
const maxStderrLine = 4096

// lineLogger is an io.Writer that logs each line written to it (a child's
// stderr) through slog, splitting lines longer than maxStderrLine.
type lineLogger struct {
	logger *slog.Logger

	mu  sync.Mutex
	buf []byte
}

// Write implements io.Writer.
func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i], false)
		l.buf = l.buf[i+1:]
	}
	for len(l.buf) >= maxStderrLine {
		l.emit(l.buf[:maxStderrLine], true)
		l.buf = l.buf[maxStderrLine:]
	}
	if len(l.buf) == 0 {
		l.buf = nil // release the backing array of a long burst
	}
	return len(p), nil
}

// Flush logs a trailing partial line.
func (l *lineLogger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf, false)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte, continued bool) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 && !continued {
		return
	}
	attrs := []any{"line", string(bytes.ToValidUTF8(line, []byte("\uFFFD")))}
	if continued {
		attrs = append(attrs, "continued", true)
	}
	l.logger.Info("upstream stderr", attrs...)
}
