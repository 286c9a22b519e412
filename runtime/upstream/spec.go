package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/sandbox"
)

// Defaults applied when the corresponding Spec field is zero.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	DefaultTerminateGrace = 1 * time.Second
	DefaultHealthInterval = 15 * time.Second
)

// Spec describes one upstream MCP server. Exactly one of Command, URL and SSE
// must be set.
type Spec struct {
	// Name identifies the upstream (server_id) in logs, states and errors.
	Name string

	// Command is the argv of a local server spoken to over stdio. No shell
	// is involved. The child gets a minimal environment (PATH, HOME, LANG,
	// TZ, TMPDIR: see runtime/sandbox) plus Env, nothing else of the
	// parent's.
	Command []string
	// Env holds the KEY=VALUE entries the child gets on top of the minimal
	// environment; they override minimal variables of the same name.
	Env []string
	// Dir is the child's working directory ("" = the parent's).
	Dir string
	// Sandbox is the child's sandbox (nil: none; Off set: explicitly
	// none).
	Sandbox *sandbox.Policy
	// Home is the private HOME of an unsandboxed child ("" = a temporary
	// directory per start).
	Home string
	// Launcher builds the child's command (nil: sandbox.New with default
	// options).
	Launcher *sandbox.Launcher

	// URL is the endpoint of a streamable HTTP server.
	URL string
	// SSE is the endpoint of a legacy HTTP+SSE server.
	SSE string
	// Headers are sent on every request to this upstream's origin, and
	// nowhere else: typically the credential the caller resolved for this
	// upstream (Authorization: Bearer ...). Nothing else is ever forwarded.
	Headers http.Header
	// Bearer, when set, gives the bearer token of the HTTP requests to this
	// upstream's origin that carry no per-call token (see WithBearer): the
	// handshake, listings, pings and the server event stream, which no
	// caller is bound to. It is called for every such request, so it should
	// cache; an error fails the request. A "" token sends the configured
	// Headers unchanged.
	Bearer func(ctx context.Context) (string, error)

	// Protocol, when set, is the MCP revision to ask the server for
	// ("" = the newest the go-sdk speaks).
	Protocol string

	// ConnectTimeout bounds starting the server and the MCP handshake
	// (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// CallTimeout bounds every call, on top of the caller's context
	// (default DefaultCallTimeout).
	CallTimeout time.Duration
	// TerminateGrace is how long a stdio child gets after its stdin is
	// closed, and again after SIGTERM, before it is killed (default
	// DefaultTerminateGrace). Node servers ignore stdin close, so keep it short.
	TerminateGrace time.Duration
	// HealthInterval is the period of liveness pings for HTTP and SSE
	// upstreams, whose loss is otherwise noticed only by the next call.
	// Zero means DefaultHealthInterval for HTTP/SSE and no pings for stdio
	// (a stdio child's death is seen at once); negative disables pings.
	// A ping that fails only with a timeout never restarts a session.
	HealthInterval time.Duration
}

// ErrInvalidSpec is matched (errors.Is) by every *SpecError.
var ErrInvalidSpec = errors.New("invalid upstream spec")

// SpecError reports an invalid Spec field.
type SpecError struct {
	Name   string // Spec.Name
	Field  string // offending field
	Reason string
}

// Error implements error.
func (e *SpecError) Error() string {
	return fmt.Sprintf("upstream %q: %s: %s", e.Name, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidSpec) true.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// reservedHeader reports whether k may not be set through Spec.Headers
// because the transport owns it.
// Every Mcp-* header belongs to the MCP transport (Mcp-Session-Id,
// Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*).
func reservedHeader(k string) bool {
	k = http.CanonicalHeaderKey(k)
	switch k {
	case "Accept", "Accept-Encoding", "Connection", "Content-Length", "Content-Type", "Host",
		"Keep-Alive", "Last-Event-Id", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return strings.HasPrefix(k, "Mcp-")
}

// Validate reports the first problem with s as a *SpecError.
func (s *Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &SpecError{Name: s.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(s.Name) == "" {
		return bad("name", "must not be empty")
	}
	set := 0
	for _, b := range []bool{len(s.Command) > 0, s.URL != "", s.SSE != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return bad("command/url/sse", "exactly one must be set, got %d", set)
	}
	if len(s.Command) > 0 && s.Command[0] == "" {
		return bad("command", "program must not be empty")
	}
	for i, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return bad(fmt.Sprintf("env[%d]", i), "want KEY=VALUE")
		}
	}
	if len(s.Command) == 0 {
		if s.Env != nil || s.Dir != "" || s.Sandbox != nil || s.Home != "" {
			return bad("env/dir", "only valid with command (as are sandbox and home)")
		}
		field, raw := "url", s.URL
		if s.SSE != "" {
			field, raw = "sse", s.SSE
		}
		u, err := url.Parse(raw)
		if err != nil {
			return bad(field, "%v", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad(field, "want an absolute http or https URL")
		}
		if u.User != nil {
			return bad(field, "credentials in the URL are not allowed; use headers")
		}
	} else if len(s.Headers) > 0 {
		return bad("headers", "only valid with url or sse")
	}
	for k, vs := range s.Headers {
		if !validHeaderName(k) {
			return bad("headers", "invalid header name %q", k)
		}
		if reservedHeader(k) {
			return bad("headers", "header %q is managed by the transport", k)
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n\x00") {
				return bad("headers", "header %q has a control character in its value", k)
			}
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"connect_timeout", s.ConnectTimeout}, {"call_timeout", s.CallTimeout}, {"terminate_grace", s.TerminateGrace}} {
		if d.v < 0 {
			return bad(d.field, "must not be negative")
		}
	}
	return nil
}

// validHeaderName reports whether k is an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// transportKind names the transport a valid spec selects.
func (s *Spec) transportKind() string {
	switch {
	case len(s.Command) > 0:
		return "stdio"
	case s.URL != "":
		return "http"
	default:
		return "sse"
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
