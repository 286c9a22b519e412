package firewall

import (
	"encoding/json"
	"errors"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// parsePointer splits a selector's JSON pointer into its unescaped reference
// tokens (internal/jsonpointer). Errors wrap ErrBadSelector.
func parsePointer(p string) ([]string, error) {
	toks, err := jsonpointer.Parse(p, MaxPointerBytes)
	switch {
	case errors.Is(err, jsonpointer.ErrTooLong):
		return nil, badSelector("pointer longer than %d bytes", MaxPointerBytes)
	case errors.Is(err, jsonpointer.ErrNoSlash):
		return nil, badSelector("pointer %s must be empty or start with \"/\"", quoteShort(p))
	case err != nil:
		return nil, badSelector("pointer %s: \"~\" must be followed by 0 or 1", quoteShort(p))
	}
	return toks, nil
}

// unquote decodes a raw JSON string literal.
func unquote(raw []byte) (string, error) {
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}
