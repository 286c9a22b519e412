package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
)

// Sentinel causes wrapped by *Error values.
var (
	// ErrNotConnected: the upstream has no live session (connecting, down,
	// or Run not running).
	ErrNotConnected = errors.New("upstream not connected")
	// ErrClosed: the Client was closed or its Run returned.
	ErrClosed = errors.New("upstream client closed")
	// ErrAlreadyRunning: Run was called while another Run is active.
	ErrAlreadyRunning = errors.New("upstream client already running")
	// ErrSessionEnded: the session a call was using ended under it (the
	// process died, the connection broke, or the supervisor restarted it).
	ErrSessionEnded = errors.New("upstream session ended")
	// ErrCallTimeout: the call exceeded Spec.CallTimeout.
	ErrCallTimeout = errors.New("upstream call timed out")
	// ErrConnectTimeout: starting the server and the handshake exceeded
	// Spec.ConnectTimeout.
	ErrConnectTimeout = errors.New("upstream connect timed out")
)

// Error is the classified failure of an upstream call or connection attempt.
// An upstream tool's own isError result is not an Error.
type Error struct {
	Code      string // one of the upstream-error codes of package codes
	Retryable bool   // the same call may succeed if retried
	Err       error  // the underlying cause (may be logged, never shown verbatim to a model)

	// HTTPStatus is the HTTP status behind the failure, when there was one.
	HTTPStatus int
	// RetryAfter is the server's Retry-After hint on a 429/503, if any.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err == nil {
		return e.Code
	}
	return e.Code + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Code returns the taxonomy code of err: "" for nil, the Code of the first
// *Error in its chain, or codes.UpstreamError for any other error.
func Code(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return codes.UpstreamError
}

// IsRetryable reports whether err carries an *Error marked retryable.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable
}

func newError(code string, err error) *Error {
	return &Error{
		Code:      code,
		Retryable: codes.Retryable(code),
		Err:       err,
	}
}

// statusProbe records the last HTTP error status seen by requests made with
// a context carrying it. The go-sdk reports HTTP failures as plain strings
// (http.StatusText), so the header-adding RoundTripper fills a probe carried
// in the request context instead, and classification reads it back.
type statusProbe struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
}

type probeKey struct{}

func withProbe(ctx context.Context) (context.Context, *statusProbe) {
	p := &statusProbe{}
	return context.WithValue(ctx, probeKey{}, p), p
}

func probeFrom(ctx context.Context) *statusProbe {
	p, _ := ctx.Value(probeKey{}).(*statusProbe)
	return p
}

func (p *statusProbe) record(resp *http.Response) {
	ra := parseRetryAfter(resp.Header.Get("Retry-After"))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.retryAfter = resp.StatusCode, ra
}

func (p *statusProbe) get() (int, time.Duration) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.retryAfter
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// codeForStatus maps an HTTP status to a taxonomy code ("" = no opinion).
func codeForStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return codes.AuthFailed
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusTooManyRequests:
		return codes.RateLimited
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.UpstreamUnavailable
	case 0:
		return ""
	}
	if status >= 400 {
		return codes.UpstreamError
	}
	return ""
}

// JSON-RPC codes of the go-sdk's jsonrpc2 "closing" errors.
const (
	codeServerClosing = -32004
	codeClientClosing = -32003
)

// classify turns err, returned by a go-sdk call made with callCtx, into an
// *Error. parent is the caller's context (before CallTimeout and session
// binding were added); probe is the status probe carried by callCtx.
func classify(parent, callCtx context.Context, probe *statusProbe, sessionDone bool, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	fromStatus := func() *Error {
		if status, retryAfter := probe.get(); status != 0 {
			if code := codeForStatus(status); code != "" {
				e := newError(code, err)
				e.HTTPStatus, e.RetryAfter = status, retryAfter
				return e
			}
		}
		return nil
	}
	if callCtx != nil && callCtx.Err() != nil {
		cause := context.Cause(callCtx)
		switch {
		case errors.Is(cause, ErrCallTimeout), errors.Is(cause, ErrConnectTimeout):
			return newError(codes.UpstreamTimeout, cause)
		case parent != nil && errors.Is(parent.Err(), context.DeadlineExceeded):
			return newError(codes.UpstreamTimeout, context.Cause(parent))
		case parent != nil && parent.Err() != nil:
			// The caller gave up: not an upstream failure, and not retryable.
			return newError(codes.UpstreamError, context.Cause(parent))
		}
		// Cancelled from our side: the session went away under the call.
		// An HTTP status answered to this very call (a 401 ends a go-sdk
		// HTTP session) explains it better.
		if e := fromStatus(); e != nil {
			return e
		}
		if !errors.Is(cause, ErrSessionEnded) {
			cause = fmt.Errorf("%w: %w", ErrSessionEnded, cause)
		}
		return newError(codes.UpstreamUnavailable, fmt.Errorf("%w: %w", cause, err))
	}
	if e := fromStatus(); e != nil {
		return e
	}
	if isTransportFailure(err) {
		return newError(codes.UpstreamUnavailable, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return newError(codes.UpstreamTimeout, err)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		if rpcErr.Code == codeServerClosing || rpcErr.Code == codeClientClosing {
			return newError(codes.UpstreamUnavailable, err)
		}
		return newError(codes.UpstreamError, err)
	}
	if sessionDone {
		return newError(codes.UpstreamUnavailable, err)
	}
	// Last resort: the go-sdk renders HTTP failures it did not route through
	// our RoundTripper's probe as http.StatusText.
	msg := err.Error()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests} {
		if strings.Contains(msg, http.StatusText(status)) {
			e := newError(codeForStatus(status), err)
			e.HTTPStatus = status
			return e
		}
	}
	return newError(codes.UpstreamError, err)
}

// isTransportFailure reports whether err means the connection to the
// upstream is gone or could not be made.
func isTransportFailure(err error) bool {
	switch {
	case errors.Is(err, mcp.ErrConnectionClosed),
		errors.Is(err, mcp.ErrSessionMissing),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.ErrClosedPipe),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, os.ErrClosed),
		errors.Is(err, os.ErrProcessDone),
		errors.Is(err, exec.ErrNotFound),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return true
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return true
	}
	var pathErr *os.PathError
	if errors.As(err, &pathErr) && pathErr.Op == "fork/exec" {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && !opErr.Timeout() {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && !dnsErr.Timeout()
}
