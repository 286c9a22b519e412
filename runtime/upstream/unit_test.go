package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
)

func TestSpecValidate(t *testing.T) {
	t.Parallel()
	ok := func(s Spec) Spec { return s }
	tests := []struct {
		name  string
		spec  Spec
		field string // "" = valid
	}{
		{"stdio", ok(Spec{Name: "a", Command: []string{"srv", "-x"}, Env: []string{"K=V", "E="}}), ""},
		{"http", ok(Spec{Name: "a", URL: "https://h.example/mcp", Headers: http.Header{"Authorization": {"Bearer t"}}}), ""},
		{"sse", ok(Spec{Name: "a", SSE: "http://127.0.0.1:9/sse"}), ""},
		{"no name", Spec{Command: []string{"x"}}, "name"},
		{"none set", Spec{Name: "a"}, "command/url/sse"},
		{"two set", Spec{Name: "a", Command: []string{"x"}, URL: "http://h/"}, "command/url/sse"},
		{"empty program", Spec{Name: "a", Command: []string{""}}, "command"},
		{"bad env", Spec{Name: "a", Command: []string{"x"}, Env: []string{"NOEQUALS"}}, "env[0]"},
		{"env with url", Spec{Name: "a", URL: "http://h/", Env: []string{"K=V"}}, "env/dir"},
		{"relative url", Spec{Name: "a", URL: "/mcp"}, "url"},
		{"ftp url", Spec{Name: "a", SSE: "ftp://h/x"}, "sse"},
		{"userinfo", Spec{Name: "a", URL: "http://u:p@h/"}, "url"},
		{"headers with stdio", Spec{Name: "a", Command: []string{"x"}, Headers: http.Header{"X": {"1"}}}, "headers"},
		{"reserved header", Spec{Name: "a", URL: "http://h/", Headers: http.Header{"Mcp-Session-Id": {"1"}}}, "headers"},
		{"reserved mcp prefix", Spec{Name: "a", URL: "http://h/", Headers: http.Header{"mcp-param-x": {"1"}}}, "headers"},
		{"content-type", Spec{Name: "a", URL: "http://h/", Headers: http.Header{"content-type": {"x"}}}, "headers"},
		{"bad header name", Spec{Name: "a", URL: "http://h/", Headers: http.Header{"X Y": {"1"}}}, "headers"},
		{"header injection", Spec{Name: "a", URL: "http://h/", Headers: http.Header{"X": {"a\r\nB: c"}}}, "headers"},
		{"negative timeout", Spec{Name: "a", URL: "http://h/", CallTimeout: -1}, "call_timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			var se *SpecError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("Validate = %v, want *SpecError", err)
			}
			if se.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", se.Field, tc.field, err)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	live := context.Background()
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	callerDeadline, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	callerCancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	withStatus := func(status int) *statusProbe {
		p := &statusProbe{}
		p.record(&http.Response{StatusCode: status, Header: http.Header{}})
		return p
	}
	urlErr := func(err error) error {
		return fmt.Errorf("calling \"tools/call\": sending: rejected by transport: %w", &url.Error{Op: "Post", URL: "http://x", Err: err})
	}
	tests := []struct {
		name        string
		parent, ctx context.Context
		probe       *statusProbe
		ended       bool
		err         error
		code        string
	}{
		{"already classified", live, live, nil, false, &Error{Code: codes.RateLimited}, codes.RateLimited},
		{"call timeout", live, cancelled(ErrCallTimeout), nil, false, context.DeadlineExceeded, codes.UpstreamTimeout},
		{"caller deadline", callerDeadline, callerDeadline, nil, false, context.DeadlineExceeded, codes.UpstreamTimeout},
		{"caller cancelled", callerCancelled, callerCancelled, nil, false, context.Canceled, codes.UpstreamError},
		{"session ended", live, cancelled(fmt.Errorf("%w: x", ErrSessionEnded)), nil, false, context.Canceled, codes.UpstreamUnavailable},
		{"cancelled by us", live, cancelled(context.Canceled), nil, false, context.Canceled, codes.UpstreamUnavailable},
		{"401", live, live, withStatus(401), false, errors.New("sending: Unauthorized"), codes.AuthFailed},
		{"403", live, live, withStatus(403), false, errors.New("x"), codes.PermissionDenied},
		{"429", live, live, withStatus(429), false, errors.New("x"), codes.RateLimited},
		{"503", live, live, withStatus(503), false, errors.New("x"), codes.UpstreamUnavailable},
		{"500", live, live, withStatus(500), false, errors.New("x"), codes.UpstreamError},
		{"404 session missing", live, live, nil, false, fmt.Errorf("x: %w", mcp.ErrSessionMissing), codes.UpstreamUnavailable},
		{"connection closed", live, live, nil, false, fmt.Errorf("%w: calling: client is closing", mcp.ErrConnectionClosed), codes.UpstreamUnavailable},
		{"EOF", live, live, nil, false, fmt.Errorf("calling \"tools/call\": %w", io.EOF), codes.UpstreamUnavailable},
		{"refused", live, live, nil, false, urlErr(&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), codes.UpstreamUnavailable},
		{"reset", live, live, nil, false, urlErr(syscall.ECONNRESET), codes.UpstreamUnavailable},
		{"broken pipe", live, live, nil, false, &os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}, codes.UpstreamUnavailable},
		{"program not in PATH", live, live, nil, false, &exec.Error{Name: "nope", Err: exec.ErrNotFound}, codes.UpstreamUnavailable},
		{"program missing", live, live, nil, false, &os.PathError{Op: "fork/exec", Path: "/nope", Err: syscall.ENOENT}, codes.UpstreamUnavailable},
		{"jsonrpc error", live, live, nil, false, fmt.Errorf("calling: %w", &jsonrpc.Error{Code: -32602, Message: "unknown tool"}), codes.UpstreamError},
		{"jsonrpc server closing", live, live, nil, false, &jsonrpc.Error{Code: codeServerClosing, Message: "closing"}, codes.UpstreamUnavailable},
		{"unknown error on a dead session", live, live, nil, true, errors.New("weird"), codes.UpstreamUnavailable},
		{"status text fallback", live, live, nil, false, errors.New("failed to connect: Forbidden"), codes.PermissionDenied},
		{"anything else", live, live, nil, false, errors.New("weird"), codes.UpstreamError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := classify(tc.parent, tc.ctx, tc.probe, tc.ended, tc.err)
			if e.Code != tc.code {
				t.Fatalf("code = %s, want %s (%v)", e.Code, tc.code, e)
			}
			wantRetry := tc.code == codes.UpstreamTimeout || tc.code == codes.UpstreamUnavailable || tc.code == codes.RateLimited
			if tc.name != "already classified" && e.Retryable != wantRetry {
				t.Errorf("retryable = %v, want %v", e.Retryable, wantRetry)
			}
			if Code(e) != tc.code {
				t.Errorf("Code() = %q", Code(e))
			}
		})
	}
	if Code(nil) != "" || Code(errors.New("x")) != codes.UpstreamError {
		t.Error("Code() of nil / plain error")
	}
	var e error = newError(codes.UpstreamTimeout, ErrCallTimeout)
	if !errors.Is(fmt.Errorf("wrapped: %w", e), ErrCallTimeout) || !IsRetryable(fmt.Errorf("w: %w", e)) {
		t.Error("*Error must unwrap to its cause and stay detectable through wrapping")
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	if d := parseRetryAfter("3"); d != 3*time.Second {
		t.Errorf("3 -> %v", d)
	}
	if d := parseRetryAfter(time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)); d < 8*time.Second || d > 10*time.Second {
		t.Errorf("date -> %v", d)
	}
	if d := parseRetryAfter("soon"); d != 0 {
		t.Errorf("junk -> %v", d)
	}
}

func TestLineLogger(t *testing.T) {
	t.Parallel()
	var sink logSink
	l := &lineLogger{logger: sink.logger()}
	long := strings.Repeat("x", maxStderrLine+10)
	for _, chunk := range []string{"first li", "ne\nsecond\r\n\n", long, "\ntail without newline"} {
		if n, err := l.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	l.Flush()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	want := []string{
		"INFO upstream stderr line=first line",
		"INFO upstream stderr line=second",
		"INFO upstream stderr line=" + strings.Repeat("x", maxStderrLine) + " continued=true",
		"INFO upstream stderr line=xxxxxxxxxx",
		"INFO upstream stderr line=tail without newline",
	}
	if len(sink.lines) != len(want) {
		t.Fatalf("got %d lines: %q", len(sink.lines), sink.lines)
	}
	for i := range want {
		if sink.lines[i] != want[i] {
			t.Errorf("line %d = %.80q, want %.80q", i, sink.lines[i], want[i])
		}
	}
}

func TestJitter(t *testing.T) {
	t.Parallel()
	for range 1000 {
		if d := jitter(time.Second); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("jitter(1s) = %v", d)
		}
	}
}
