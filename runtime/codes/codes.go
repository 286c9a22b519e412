// Package codes is the one table of the error codes quiver puts on the
// wire: in the error object of a tool result ({"error": CODE, ...}, spec
// 003 §3.4), in the message of a JSON-RPC error, and in receipts. Agents
// branch on these codes, so they are stable.
//
// Each code says once what the rest of quiver would otherwise decide in
// several places: whether the same call may succeed if retried, who raises
// it (quiver itself or an upstream), what the request's receipt records,
// and which JSON-RPC error code carries it when it ends a request that is
// not a tool call. It is a leaf package so that runtime/guard,
// runtime/upstream and runtime can all name their codes from here.
//
// docs/errors.md lists every code; a test keeps the two equal.
package codes

import (
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Codes of the gateway surface (spec 003 §3.4, §9.4). A constant's name is
// its code in camel case.
const (
	ArgsInvalid      = "ARGS_INVALID"
	PathInvalid      = "PATH_INVALID"
	PathNotFound     = "PATH_NOT_FOUND"
	SchemaInvalid    = "SCHEMA_INVALID"
	HydrateFailed    = "HYDRATE_FAILED"
	ViewFailed       = "VIEW_FAILED"
	ResourceNotFound = "RESOURCE_NOT_FOUND"
	PromptNotFound   = "PROMPT_NOT_FOUND"
	Internal         = "INTERNAL"
	ResultTooLarge   = "RESULT_TOO_LARGE"
	StateUnavailable = "STATE_UNAVAILABLE"
)

// Codes of the upstream-error taxonomy (spec 003 §3.4), classified by
// runtime/upstream from a failed call.
const (
	UpstreamError       = "UPSTREAM_ERROR"
	UpstreamTimeout     = "UPSTREAM_TIMEOUT"
	UpstreamUnavailable = "UPSTREAM_UNAVAILABLE"
	AuthFailed          = "AUTH_FAILED"
	PermissionDenied    = "PERMISSION_DENIED"
	RateLimited         = "RATE_LIMITED"
)

// Codes of the safety profile (spec 001).
const (
	PolicyDenied             = "POLICY_DENIED"
	ApprovalRequired         = "APPROVAL_REQUIRED"
	ClientCredentialRejected = "CLIENT_CREDENTIAL_REJECTED"
	PathOutsideWorkspace     = "PATH_OUTSIDE_WORKSPACE"
	EgressBlocked            = "EGRESS_BLOCKED"
	Unauthenticated          = "UNAUTHENTICATED"
)

// Codes of the execute-path guards (spec 000, and quiver's additions for
// the same guards).
const (
	ToolUnclassifiedDenied       = "TOOL_UNCLASSIFIED_DENIED"
	ToolClassMismatch            = "TOOL_CLASS_MISMATCH"
	ToolClassDeclarationMismatch = "TOOL_CLASS_DECLARATION_MISMATCH"
	DocSizeExceeded              = "DOC_SIZE_EXCEEDED"
	DocHashMismatch              = "DOC_HASH_MISMATCH"
	DocContentPointerInvalid     = "DOC_CONTENT_POINTER_INVALID"
	DocEncodingInvalid           = "DOC_ENCODING_INVALID"
	IdempotencyKeyRequired       = "IDEMPOTENCY_KEY_REQUIRED"
	IdempotencyKeyReused         = "IDEMPOTENCY_KEY_REUSED"
	IdempotencyKeyInProgress     = "IDEMPOTENCY_KEY_IN_PROGRESS"
	IdempotencyOutcomeUnknown    = "IDEMPOTENCY_OUTCOME_UNKNOWN"
	RegistryVersionMismatch      = "REGISTRY_VERSION_MISMATCH"
)

// Codes of governed tools (spec 002): cli upstreams, output validation and
// the permission engine.
const (
	CliArgRefused     = "CLI_ARG_REFUSED"
	OutputInvalid     = "OUTPUT_INVALID"
	PermissionMissing = "PERMISSION_MISSING"
)

// Codes of server-to-client requests (sampling, elicitation) relayed from
// an upstream to a client, and of tool results that are errors.
const (
	RelayDenied             = "RELAY_DENIED"
	ClientCapabilityMissing = "CLIENT_CAPABILITY_MISSING"
	RelayNoCaller           = "RELAY_NO_CALLER"
	RelayAmbiguous          = "RELAY_AMBIGUOUS"
	RelaySessionless        = "RELAY_SESSIONLESS"
	RequestStateInvalid     = "REQUEST_STATE_INVALID"
	TaskInvalid             = "TASK_INVALID"
	ClientError             = "CLIENT_ERROR"
	ToolError               = "TOOL_ERROR"
)

// Codes of capability tokens (spec 004): runtime/capability.
const (
	CapabilityInvalid       = "CAPABILITY_INVALID"
	CapabilityRequestDenied = "CAPABILITY_REQUEST_DENIED"
	ToolRequestPending      = "TOOL_REQUEST_PENDING"
)

// Codes of requests the go-sdk refused or failed before quiver's handlers
// ran (receipts only: the client gets the go-sdk's own JSON-RPC error or
// HTTP status).
const (
	MethodNotFound             = "METHOD_NOT_FOUND"
	InvalidParams              = "INVALID_PARAMS"
	InvalidRequest             = "INVALID_REQUEST"
	ParseError                 = "PARSE_ERROR"
	ProtocolVersionUnsupported = "PROTOCOL_VERSION_UNSUPPORTED"
	HeaderMismatch             = "HEADER_MISMATCH"
	ProtocolError              = "PROTOCOL_ERROR"
	Cancelled                  = "CANCELLED"
	SessionNotFound            = "SESSION_NOT_FOUND"
	Forbidden                  = "FORBIDDEN"
)

// Codes of HTTP requests the listener refused before MCP routing because
// it holds as many sessions as it may.
const (
	SessionLimitExceeded    = "SESSION_LIMIT_EXCEEDED"
	SessionCapacityExceeded = "SESSION_CAPACITY_EXCEEDED"
)

// Origin says who raises a code. A code may have several origins; an
// error value knows its one (runtime.Error, for instance, records whether
// it classifies an upstream's failure).
type Origin uint8

// The origins of a code, combinable.
const (
	// Quiver: the gateway refuses or fails the request itself.
	Quiver Origin = 1 << iota
	// Upstream: the code classifies an upstream's failure or answer.
	Upstream
	// Client: the code classifies a downstream client's failure to
	// answer a request relayed to it.
	Client
)

// Receipt is what a request's receipt records when the request ends with a
// code: the gateway's decision and the outcome's status.
type Receipt uint8

// The receipts of a code.
const (
	// Deny: the gateway refused the request (decision deny, the code
	// first among the reason codes, outcome error).
	Deny Receipt = iota + 1
	// AllowError: the gateway let the request through and it failed
	// later (decision allow, outcome error).
	AllowError
	// AllowTimeout is AllowError whose outcome status is timeout.
	AllowTimeout
)

// Info is one row of the table.
type Info struct {
	Code string
	// Retryable is the hint agents get: the same call may succeed if
	// retried. An error may override it where it knows better (a rate
	// limit's session cap, for one).
	Retryable bool
	// Origin is who raises the code.
	Origin Origin
	// Receipt is the receipt of the code raised by quiver (or by the only
	// origin it has). A code raised by an upstream or a client is never a
	// refusal by the gateway, which let the request through; see Receipted.
	Receipt Receipt
	// JSONRPC is the JSON-RPC error code quiver answers with when the code
	// ends a request that is not a tool call (direct mode's prompts/get,
	// resources/read, completion/complete, resources/subscribe); the
	// message starts with the code. For a request the go-sdk refused, it is
	// the go-sdk's code that the receipt's code names. Refused
	// server-to-client requests are answered with plain errors, which the
	// go-sdk sends with code 0; codes that never end a JSON-RPC request
	// (receipts only) have 0 too.
	JSONRPC int64
	// Description is one line for the docs.
	Description string
}

const (
	invalidParams = jsonrpc.CodeInvalidParams
	internalError = jsonrpc.CodeInternalError
	// The MCP-specific JSON-RPC codes of the go-sdk (mcp.CodeHeaderMismatch,
	// mcp.CodeUnsupportedProtocolVersion), kept here so that the leaf
	// package does not import the whole mcp package; a test compares them.
	headerMismatch             = -32020
	unsupportedProtocolVersion = -32022
	missingClientCapabilities  = -32021
)

// table is built once and never written; All hands out a copy.
var table = []Info{
	{Code: ArgsInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "the arguments do not match the tool's input schema, or a request parameter is malformed"},
	{Code: PathInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "a catalog path is malformed (spec 003 §3.2)"},
	{Code: PathNotFound, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "a well-formed catalog path names no node of the current catalog"},
	{Code: SchemaInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the tool's input schema failed validation at ingest, so the tool cannot be called"},
	{Code: HydrateFailed, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "no tool with this id or name is in the current catalog, or none the caller may see (the two answer alike; the receipt says CONCEALED)"},
	{Code: ViewFailed, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "no artifact has this handle for this caller, or the selector cannot be applied"},
	{Code: ResourceNotFound, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "no resource (or resource template) with this id or URI is visible to the caller"},
	{Code: PromptNotFound, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "no prompt with this id or name is visible to the caller"},
	{Code: Internal, Origin: Quiver, Receipt: AllowError, JSONRPC: internalError,
		Description: "the gateway failed; the cause is in the server log"},
	{Code: ResultTooLarge, Origin: Quiver, Receipt: AllowError, JSONRPC: internalError,
		Description: "the result exceeds the artifact store's quota; nothing of it is returned or kept"},
	{Code: StateUnavailable, Retryable: true, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the state backend (embedded store or Redis) cannot be reached; the call was refused before anything was done (fail closed)"},

	{Code: UpstreamError, Origin: Upstream, Receipt: AllowError, JSONRPC: internalError,
		Description: "the upstream failed the call in any other way, including a JSON-RPC error it answered"},
	{Code: UpstreamTimeout, Retryable: true, Origin: Quiver | Upstream, Receipt: AllowTimeout, JSONRPC: internalError,
		Description: "the upstream did not answer in time"},
	{Code: UpstreamUnavailable, Retryable: true, Origin: Quiver | Upstream, Receipt: AllowError, JSONRPC: internalError,
		Description: "the upstream is not connected, or its connection or process ended"},
	{Code: AuthFailed, Origin: Quiver | Upstream, Receipt: AllowError, JSONRPC: internalError,
		Description: "the upstream rejected the gateway's credentials (HTTP 401), or the token exchange for it failed"},
	{Code: PermissionDenied, Origin: Upstream, Receipt: AllowError, JSONRPC: internalError,
		Description: "the upstream denied the call (HTTP 403)"},
	{Code: RateLimited, Retryable: true, Origin: Quiver | Upstream, Receipt: Deny, JSONRPC: internalError,
		Description: "a rate limit of quiver's (rate_limits: a refusal, receipted deny) or the upstream's (HTTP 429: receipted allow) was reached; details.retry_after when known"},

	{Code: PolicyDenied, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the policy or the incident state refuses the call; details.reason_codes say why"},
	{Code: ApprovalRequired, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "an operator must grant details.approval_id; the identical call then proceeds once"},
	{Code: ClientCredentialRejected, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the arguments carry a credential, which quiver never forwards upstream"},
	{Code: PathOutsideWorkspace, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a path argument resolves outside the upstream's workspace roots"},
	{Code: EgressBlocked, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a URL argument names a host outside the upstream's egress allowlist; also the receipt (method `egress`, the host as a sha256 prefix) of a connection a sandboxed server tried through the egress proxy and was refused"},
	{Code: Unauthenticated, Origin: Quiver, Receipt: Deny,
		Description: "receipts only: an HTTP request without a valid bearer token, refused with 401 before MCP routing"},

	{Code: ToolUnclassifiedDenied, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "no registry manifest classifies the tool and the environment is prod"},
	{Code: ToolClassMismatch, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a read-only caller called a write tool"},
	{Code: ToolClassDeclarationMismatch, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the caller's declared tool_class disagrees with the registry"},
	{Code: DocSizeExceeded, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a document, or the documents of one call, exceed the manifest's limits"},
	{Code: DocHashMismatch, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a document's sha256 differs from the caller's expected_document_hashes"},
	{Code: DocContentPointerInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a content pointer does not address a string, or an expected hash names no content pointer"},
	{Code: DocEncodingInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "content is not valid for its content_encoding"},
	{Code: IdempotencyKeyRequired, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a write tool was called without an idempotency_key"},
	{Code: IdempotencyKeyReused, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the idempotency_key was used before with another tool or other arguments"},
	{Code: IdempotencyKeyInProgress, Retryable: true, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a call with the same idempotency_key is running; retry when it has finished"},
	{Code: IdempotencyOutcomeUnknown, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "a call with the same idempotency_key was sent but its outcome is unknown; it is never sent again under this key"},
	{Code: RegistryVersionMismatch, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the call was judged against another registry version than the one pinned at start, or the registry failed to load"},

	{Code: RelayDenied, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the policy (or incident mode) does not let the upstream send this sampling, elicitation or roots request to the client; to the upstream, or to a 2026-07-28 client whose request it ends"},
	{Code: ClientCapabilityMissing, Origin: Quiver, Receipt: Deny, JSONRPC: missingClientCapabilities,
		Description: "the client did not announce the sampling, elicitation or roots capability the upstream's request needs; to the upstream, or to a 2026-07-28 client whose request it ends"},
	{Code: RelayNoCaller, Origin: Quiver, Receipt: Deny,
		Description: "to the upstream: no call of any client is in flight on its session, so there is nobody to ask"},
	{Code: RelayAmbiguous, Origin: Quiver, Receipt: Deny,
		Description: "to the upstream: calls of several clients are in flight on its shared session (sessions: per_client removes the ambiguity)"},
	{Code: RelaySessionless, Origin: Quiver, Receipt: Deny,
		Description: "to the upstream: it sent a request in the middle of a call for a client at 2026-07-28 outside a call quiver holds (such calls are held, and their requests go to the client as input_required results)"},
	{Code: RequestStateInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "a retry's requestState is tampered, expired, already used, another caller's, for another request, or names a held call that ended or is held by another replica: a JSON-RPC error, for tools/call too; nothing reached the upstream"},
	{Code: TaskInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "tasks/get, tasks/update or tasks/cancel named a task id quiver did not issue, altered, expired, or issued to another caller: nothing reached the upstream"},
	{Code: ClientError, Origin: Client, Receipt: AllowError,
		Description: "receipts only: a relayed request reached the client, which answered with an error or not at all"},
	{Code: ToolError, Origin: Upstream, Receipt: AllowError,
		Description: "receipts only: the upstream tool answered with a result whose isError is true"},

	{Code: CliArgRefused, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "a cli tool's argv template refused a validated value: one that begins with '-' where an option could be read (the manifest puts no \"--\" before it and joins it to no prefix), a NUL byte, an object, or a command line over 128 KiB; nothing ran"},
	{Code: OutputInvalid, Origin: Quiver, Receipt: AllowError, JSONRPC: internalError,
		Description: "the tool's result does not follow its outputSchema, or a cli tool's output is not what its parser reads; the result is withheld (logged and receipted, never shown)"},
	{Code: PermissionMissing, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "the caller lacks a permission the tool needs: its manifest's permissions, allow_destructive for a destructive tool, or the elevated permissions its elevation rule asks for these arguments; details.missing lists them"},
	{Code: CapabilityInvalid, Origin: Quiver, Receipt: Deny, JSONRPC: invalidParams,
		Description: "the tool needs a capability token and none was presented, or the token or its proof of possession is refused: details.reason says why (details.request how to ask for one), details.code is spec 004's -32003; nothing reached the upstream"},
	{Code: CapabilityRequestDenied, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the access declarations do not let the principal hold a capability for a requested tool (details.tools), an operator denied the request, or an attenuation would widen its parent"},
	{Code: ToolRequestPending, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the caller is a restricted principal: its call was recorded as request details.request_id, which a full principal with the fulfil permission runs on its behalf (tool_fulfil); read the result with tool_requests"},

	{Code: MethodNotFound, Origin: Quiver, Receipt: Deny, JSONRPC: jsonrpc.CodeMethodNotFound,
		Description: "receipts only: the go-sdk refused a method it does not know"},
	{Code: InvalidParams, Origin: Quiver, Receipt: Deny, JSONRPC: jsonrpc.CodeInvalidParams,
		Description: "receipts only: the go-sdk refused a request's parameters before a handler saw them"},
	{Code: InvalidRequest, Origin: Quiver, Receipt: Deny, JSONRPC: jsonrpc.CodeInvalidRequest,
		Description: "receipts only: the go-sdk refused a malformed request"},
	{Code: ParseError, Origin: Quiver, Receipt: Deny, JSONRPC: jsonrpc.CodeParseError,
		Description: "receipts only: the message was not valid JSON-RPC"},
	{Code: ProtocolVersionUnsupported, Origin: Quiver, Receipt: Deny, JSONRPC: unsupportedProtocolVersion,
		Description: "receipts only: the client asked for an MCP protocol version quiver does not speak"},
	{Code: HeaderMismatch, Origin: Quiver, Receipt: Deny, JSONRPC: headerMismatch,
		Description: "receipts only: an HTTP request's MCP headers disagree with its body"},
	{Code: ProtocolError, Origin: Quiver, Receipt: Deny,
		Description: "receipts only: the go-sdk refused or failed a request in another way, or answered it without dispatch"},
	{Code: Cancelled, Origin: Quiver, Receipt: Deny,
		Description: "receipts only: the request was cancelled, or its deadline passed, before it was answered"},
	{Code: SessionNotFound, Origin: Quiver, Receipt: Deny,
		Description: "receipts only: an HTTP request named no live session (HTTP 404)"},
	{Code: Forbidden, Origin: Quiver, Receipt: Deny,
		Description: "receipts only: an HTTP request came from a host or origin that is not allowed (HTTP 403)"},

	{Code: SessionLimitExceeded, Retryable: true, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the caller holds listen.sessions.max_per_principal sessions: HTTP 429 with Retry-After to a request that would open one more; close one (DELETE) or wait for an idle one to be reaped"},
	{Code: SessionCapacityExceeded, Retryable: true, Origin: Quiver, Receipt: Deny, JSONRPC: internalError,
		Description: "the listener holds listen.sessions.max_total sessions: HTTP 503 with Retry-After to a request that would open one more"},
}

// index maps a code to its row in table; built once, never written.
var index = func() map[string]int {
	m := make(map[string]int, len(table))
	for i, in := range table {
		m[in.Code] = i
	}
	return m
}()

// All returns the table, in the order docs/errors.md lists it.
func All() []Info { return slices.Clone(table) }

// Lookup returns the row of code.
func Lookup(code string) (Info, bool) {
	i, ok := index[code]
	if !ok {
		return Info{}, false
	}
	return table[i], true
}

// Retryable reports the retryable hint of code (false for a code not in
// the table).
func Retryable(code string) bool {
	in, _ := Lookup(code)
	return in.Retryable
}

// JSONRPC returns the JSON-RPC error code that carries code when it ends a
// request that is not a tool call: the table's, or internal error for a
// code without one.
func JSONRPC(code string) int64 {
	if in, ok := Lookup(code); ok && in.JSONRPC != 0 {
		return in.JSONRPC
	}
	return internalError
}

// Receipted returns the receipt of a request that ended with code raised
// by from. An upstream's or a client's failure happens after the gateway
// let the request through, so it is never receipted as a refusal, even
// when quiver raises the same code as one (RATE_LIMITED). A code not in
// the table is receipted as a refusal; an origin of 0 counts as quiver.
func Receipted(code string, from Origin) Receipt {
	in, ok := Lookup(code)
	switch {
	case !ok:
		return Deny
	case from&Quiver == 0 && from != 0 && in.Receipt == Deny:
		return AllowError
	}
	return in.Receipt
}
