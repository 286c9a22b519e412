package protocol

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// versioned is what the go-sdk's server requests say of their revision.
type versioned interface{ ProtocolVersion() string }

// VersionOf returns the protocol revision of a server request ("" when it
// does not say).
func VersionOf(req mcp.Request) string {
	if v, ok := req.(versioned); ok {
		return v.ProtocolVersion()
	}
	return ""
}

// DeclaredOnly is receiving middleware that answers a sessionless request
// for a feature the server did not declare (prompts, resources,
// completions) with method-not-found: at the sessionless revision a client
// learns the features from server/discover, and the handlers must match
// what it says. caps returns the declared capabilities. Older revisions
// keep today's answers.
func DeclaredOnly(caps func() *mcp.ServerCapabilities) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if VersionOf(req) < Sessionless || declares(caps(), method) {
				return next(ctx, method, req)
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%q is not served: the server does not declare its capability", method)}
		}
	}
}

// declares reports whether c covers method.
func declares(c *mcp.ServerCapabilities, method string) bool {
	family, _, _ := strings.Cut(method, "/")
	switch family {
	case "prompts":
		return c != nil && c.Prompts != nil
	case "resources":
		return c != nil && c.Resources != nil
	case "completion":
		return c != nil && c.Completions != nil
	}
	return true
}
