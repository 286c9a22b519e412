package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// Wire error codes (spec 003 §3.4, §9.4). They are stable: agents branch on
// them.
const (
	CodeArgsInvalid         = "ARGS_INVALID"
	CodePathInvalid         = "PATH_INVALID"
	CodePathNotFound        = "PATH_NOT_FOUND"
	CodeSchemaInvalid       = "SCHEMA_INVALID"
	CodeUpstreamError       = upstream.CodeUpstreamError
	CodeUpstreamTimeout     = upstream.CodeTimeout
	CodeUpstreamUnavailable = upstream.CodeUnavailable
	CodeAuthFailed          = upstream.CodeAuthFailed
	CodePermissionDenied    = upstream.CodePermissionDenied
	CodeRateLimited         = upstream.CodeRateLimited
	CodeHydrateFailed       = "HYDRATE_FAILED"
	CodeViewFailed          = "VIEW_FAILED"
	CodeResourceNotFound    = "RESOURCE_NOT_FOUND"
	CodePromptNotFound      = "PROMPT_NOT_FOUND"
	CodeInternal            = "INTERNAL"

	// The safety profile (spec 001). POLICY_DENIED: the policy or the
	// incident state refuses the call (details.reason_codes say why, e.g.
	// NO_MATCHING_RULE, KILL_SWITCH, INCIDENT_MODE). APPROVAL_REQUIRED: an
	// operator must grant details.approval_id; the identical call then
	// proceeds once. CLIENT_CREDENTIAL_REJECTED: the arguments carry a
	// credential, which quiver never forwards upstream.
	CodePolicyDenied     = "POLICY_DENIED"
	CodeApprovalRequired = "APPROVAL_REQUIRED"
	CodeClientCredential = "CLIENT_CREDENTIAL_REJECTED"
)

// maxMessage caps the model-visible message of an error.
const maxMessage = 256

// Error is a gateway error as agents see it: a tool result with isError true
// whose structured content is this object. Message is one redacted line;
// the full cause goes to the server log only.
type Error struct {
	Code      string         `json:"error"`
	Message   string         `json:"message"`
	Path      string         `json:"path"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details,omitempty"`

	cause error
	// quiet keeps the message and cause out of the server log: they may
	// quote the caller's arguments.
	quiet bool
	// protocol marks the go-sdk's refusal of a request, recorded in its
	// receipt; the client sees the SDK's own JSON-RPC error.
	protocol bool
}

// Error implements error: the code and the message.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the internal cause, which is never shown to the agent.
func (e *Error) Unwrap() error { return e.cause }

// newError builds an Error with a sanitized message; timeouts,
// unavailability and rate limits are retryable (spec 003 §3.4).
func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: sanitize(fmt.Sprintf(format, args...)), Retryable: retryableCode(code)}
}

func retryableCode(code string) bool {
	return code == CodeUpstreamTimeout || code == CodeUpstreamUnavailable || code == CodeRateLimited
}

func (e *Error) withPath(p string) *Error   { e.Path = sanitize(p); return e }
func (e *Error) withCause(err error) *Error { e.cause = err; return e }
func (e *Error) withDetail(key string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = v
	return e
}

// sanitize collapses s into one line without control characters and caps
// it, so upstream text cannot smuggle structure into a model's context.
func sanitize(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			r = ' '
		}
		if r == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteRune(r)
		if b.Len() > maxMessage {
			break
		}
	}
	out := strings.TrimSpace(b.String())
	if len(out) > maxMessage {
		cut := maxMessage - len("…")
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "…"
	}
	return out
}

// classify maps an internal error to its wire Error.
func classify(err error) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	var ue *upstream.Error
	if errors.As(err, &ue) {
		e := &Error{Code: ue.Code, Retryable: ue.Retryable, cause: err}
		switch ue.Code {
		case upstream.CodeTimeout:
			e.Message = "the upstream did not answer in time"
		case upstream.CodeUnavailable:
			e.Message = "the upstream is not available"
		case upstream.CodeAuthFailed:
			e.Message = "the upstream rejected the gateway's credentials"
		case upstream.CodePermissionDenied:
			e.Message = "the upstream denied the call"
		case upstream.CodeRateLimited:
			e.Message = "the upstream is rate limiting calls"
			if ue.RetryAfter > 0 {
				e.withDetail("retry_after", ue.RetryAfter.Seconds())
			}
		default:
			// JSON-RPC errors carry the server's own message; it is
			// redacted to one capped line.
			e.Message = "upstream error: " + sanitize(upstreamMessage(ue.Err))
			e.Message = sanitize(e.Message)
		}
		return e
	}
	switch {
	case errors.Is(err, router.ErrPathInvalid):
		return &Error{Code: CodePathInvalid, Message: sanitize(err.Error()), cause: err}
	case errors.Is(err, router.ErrPathNotFound):
		return &Error{Code: CodePathNotFound, Message: sanitize(err.Error()), cause: err}
	case errors.Is(err, router.ErrArgsInvalid):
		return &Error{Code: CodeArgsInvalid, Message: sanitize(err.Error()), cause: err}
	case errors.Is(err, catalog.ErrSchemaInvalid):
		return &Error{Code: CodeSchemaInvalid, Message: "the tool's input schema failed validation at ingest; it cannot be called", cause: err}
	}
	var ae *catalog.ArgsError
	if errors.As(err, &ae) {
		e := &Error{Code: CodeArgsInvalid, Message: sanitize(ae.Error()), cause: err}
		findings := make([]map[string]string, 0, len(ae.Findings))
		for _, f := range ae.Findings {
			findings = append(findings, map[string]string{"path": sanitize(f.Path), "message": sanitize(f.Message)})
		}
		return e.withDetail("findings", findings)
	}
	return &Error{Code: CodeInternal, Message: "internal gateway error", cause: err}
}

// upstreamMessage extracts the human part of an upstream error.
func upstreamMessage(err error) string {
	if err == nil {
		return "unknown failure"
	}
	return err.Error()
}

// errorResult renders e as an MCP tool result.
func errorResult(e *Error) *mcp.CallToolResult {
	data, _ := json.Marshal(e)
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(data),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(data)}},
	}
}
