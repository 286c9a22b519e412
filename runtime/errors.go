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
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// The runtime's names for the wire codes of package codes, which holds
// their table (retryable, origin, receipt, JSON-RPC mapping): "Code" and
// the codes package's name. The handlers name codes in some two hundred
// places; these keep them short and in one block.
const (
	CodeArgsInvalid      = codes.ArgsInvalid
	CodePathInvalid      = codes.PathInvalid
	CodePathNotFound     = codes.PathNotFound
	CodeSchemaInvalid    = codes.SchemaInvalid
	CodeHydrateFailed    = codes.HydrateFailed
	CodeViewFailed       = codes.ViewFailed
	CodeResourceNotFound = codes.ResourceNotFound
	CodePromptNotFound   = codes.PromptNotFound
	CodeInternal         = codes.Internal
	CodeResultTooLarge   = codes.ResultTooLarge
	CodeStateUnavailable = codes.StateUnavailable

	CodeUpstreamError       = codes.UpstreamError
	CodeUpstreamTimeout     = codes.UpstreamTimeout
	CodeUpstreamUnavailable = codes.UpstreamUnavailable
	CodeAuthFailed          = codes.AuthFailed
	CodePermissionDenied    = codes.PermissionDenied
	CodeRateLimited         = codes.RateLimited

	CodePolicyDenied             = codes.PolicyDenied
	CodeApprovalRequired         = codes.ApprovalRequired
	CodeClientCredentialRejected = codes.ClientCredentialRejected
	CodePathOutsideWorkspace     = codes.PathOutsideWorkspace
	CodeEgressBlocked            = codes.EgressBlocked
	CodeUnauthenticated          = codes.Unauthenticated

	CodeToolUnclassifiedDenied       = codes.ToolUnclassifiedDenied
	CodeToolClassMismatch            = codes.ToolClassMismatch
	CodeToolClassDeclarationMismatch = codes.ToolClassDeclarationMismatch
	CodeDocSizeExceeded              = codes.DocSizeExceeded
	CodeDocHashMismatch              = codes.DocHashMismatch
	CodeDocContentPointerInvalid     = codes.DocContentPointerInvalid
	CodeDocEncodingInvalid           = codes.DocEncodingInvalid
	CodeIdempotencyKeyRequired       = codes.IdempotencyKeyRequired
	CodeIdempotencyKeyReused         = codes.IdempotencyKeyReused
	CodeIdempotencyKeyInProgress     = codes.IdempotencyKeyInProgress
	CodeIdempotencyOutcomeUnknown    = codes.IdempotencyOutcomeUnknown
	CodeRegistryVersionMismatch      = codes.RegistryVersionMismatch

	CodeRelayDenied             = codes.RelayDenied
	CodeClientCapabilityMissing = codes.ClientCapabilityMissing
	CodeRelayNoCaller           = codes.RelayNoCaller
	CodeRelayAmbiguous          = codes.RelayAmbiguous
	CodeRelaySessionless        = codes.RelaySessionless
	CodeRequestStateInvalid     = codes.RequestStateInvalid
	CodeTaskInvalid             = codes.TaskInvalid
	CodeClientError             = codes.ClientError
	CodeToolError               = codes.ToolError

	CodeMethodNotFound             = codes.MethodNotFound
	CodeInvalidParams              = codes.InvalidParams
	CodeInvalidRequest             = codes.InvalidRequest
	CodeParseError                 = codes.ParseError
	CodeProtocolVersionUnsupported = codes.ProtocolVersionUnsupported
	CodeHeaderMismatch             = codes.HeaderMismatch
	CodeProtocolError              = codes.ProtocolError
	CodeCancelled                  = codes.Cancelled
	CodeSessionNotFound            = codes.SessionNotFound
	CodeForbidden                  = codes.Forbidden
	CodeSessionLimitExceeded       = codes.SessionLimitExceeded
	CodeSessionCapacityExceeded    = codes.SessionCapacityExceeded

	CodeCapabilityInvalid       = codes.CapabilityInvalid
	CodeCapabilityRequestDenied = codes.CapabilityRequestDenied
	CodeToolRequestPending      = codes.ToolRequestPending
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
	// upstream is set when the error classifies an upstream's failure
	// rather than quiver's own refusal or failure: some codes (RATE_LIMITED)
	// are both, and only the origin tells the receipt which.
	upstream bool
	// quiet keeps the message and cause out of the server log: they may
	// quote the caller's arguments.
	quiet bool
	// protocol marks the go-sdk's refusal of a request, recorded in its
	// receipt; the client sees the SDK's own JSON-RPC error.
	protocol bool
	// rpcData is the data of the JSON-RPC error the code ends a request
	// with (a -32021's requiredCapabilities).
	rpcData json.RawMessage
}

// Error implements error: the code and the message.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the internal cause, which is never shown to the agent.
func (e *Error) Unwrap() error { return e.cause }

// newError builds quiver's own Error with a sanitized message and the
// code's retryable hint.
func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: sanitize(fmt.Sprintf(format, args...)), Retryable: codes.Retryable(code)}
}

// origin is who raised e.
func (e *Error) origin() codes.Origin {
	if e.upstream {
		return codes.Upstream
	}
	return codes.Quiver
}

// refusal reports whether e is the gateway's refusal of the request
// (receipt deny) rather than a failure after the gateway let it through.
func (e *Error) refusal() bool { return codes.Receipted(e.Code, e.origin()) == codes.Deny }

// timedOut reports whether e's receipt says timeout rather than error.
func (e *Error) timedOut() bool { return codes.Receipted(e.Code, e.origin()) == codes.AllowTimeout }

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
		// Retryable is the upstream error's: runtime/upstream sets it from
		// the table, and the runtime's hand-built upstream errors
		// (perclient.go) leave it false.
		e := &Error{Code: ue.Code, Retryable: ue.Retryable, cause: err, upstream: true}
		switch ue.Code {
		case CodeUpstreamTimeout:
			e.Message = "the upstream did not answer in time"
		case CodeUpstreamUnavailable:
			e.Message = "the upstream is not available"
		case CodeAuthFailed:
			e.Message = "the upstream rejected the gateway's credentials"
		case CodePermissionDenied:
			e.Message = "the upstream denied the call"
		case CodeRateLimited:
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
// completed returns res marked as a complete result (resultType
// "complete"), as a 2026-07-28 client must receive it: the go-sdk marks
// the results of tool handlers, but quiver's errors become results in the
// receiving middleware, outside them. The mark is unexported in the
// go-sdk; its JSON decoding is the one way to set it.
func completed(res *mcp.CallToolResult) *mcp.CallToolResult {
	out := &mcp.CallToolResult{}
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), out); err != nil {
		return res
	}
	out.Meta, out.Content, out.StructuredContent, out.IsError = res.Meta, res.Content, res.StructuredContent, res.IsError
	return out
}

func errorResult(e *Error) *mcp.CallToolResult {
	data, _ := json.Marshal(e)
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(data),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(data)}},
	}
}
