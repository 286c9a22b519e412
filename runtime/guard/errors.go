// Package guard enforces spec 000 (read/write separation and document
// hardening) on the tool_execute path:
//
//   - Registry: tool_registry manifests (schemas/mcp/tool_registry.schema.json),
//     validated, indexed by {server_id, tool_name} and pinned by a version,
//     the sha256 of the canonical manifests.
//   - Gate: the front door (the "gateway" layer of the spec). It re-derives
//     the tool class from the registry, never from the caller, and refuses
//     unclassified tools in prod, declarations that disagree with the
//     registry, write calls of read-only callers and write calls without an
//     idempotency key.
//   - Connector: the layer that dispatches upstream (the spec's primary
//     enforcement point). It holds the registry pinned at start, refuses any
//     call judged against another registry version, re-checks the class and
//     capability, and runs the document guards: content at the manifest's
//     JSON pointers is extracted, decoded, bounded and hashed before the call
//     and after it.
//   - IdempotencyStore: idempotency records on a state.KV shared by every process, so a repeated
//     write with the same key and arguments returns the stored result
//     instead of running again.
//
// Every check is deterministic and runs before the upstream is touched,
// except the read-side document guards, which judge the upstream's result.
// Errors are *Error values with the stable codes of package codes (spec
// 000's eight and quiver's additions for the same guards); their messages
// are one line and never carry argument values.
package guard

import (
	"fmt"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

// Error is a guard's refusal: a stable code, a one-line message without
// argument values, the JSON pointer it concerns ("" when none), and details
// safe to show the caller (pointers, sizes, limits and hashes, never
// content).
type Error struct {
	Code      string
	Message   string
	Pointer   string
	Retryable bool
	Details   map[string]any
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// deny builds an Error with the code's retryable hint; the message is
// formatted and made one line.
func deny(code, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	msg = strings.Join(strings.Fields(msg), " ")
	return &Error{Code: code, Message: msg, Retryable: codes.Retryable(code)}
}

func (e *Error) at(ptr string) *Error { e.Pointer = ptr; return e }

func (e *Error) with(k string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[k] = v
	return e
}
