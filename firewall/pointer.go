package firewall

import (
	"encoding/json"
	"strconv"
	"strings"
)

// parsePointer splits an RFC 6901 JSON pointer into its unescaped reference
// tokens: "" is the whole document, "/a~1b/0" is ["a/b", "0"]. "~" must be
// followed by "0" or "1". Errors wrap ErrBadSelector.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if len(p) > MaxPointerBytes {
		return nil, badSelector("pointer longer than %d bytes", MaxPointerBytes)
	}
	if p[0] != '/' {
		return nil, badSelector("pointer %s must be empty or start with \"/\"", quoteShort(p))
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if !strings.Contains(t, "~") {
			continue
		}
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, badSelector("pointer %s: \"~\" must be followed by 0 or 1", quoteShort(p))
			}
		}
		// Order matters: ~1 first, then ~0 (RFC 6901 §4).
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// escapeToken escapes one reference token ("~" -> "~0", "/" -> "~1").
func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// formatPointer joins unescaped reference tokens into a pointer; it inverts
// parsePointer.
func formatPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

// childPointer appends one token to a pointer.
func childPointer(p, tok string) string { return p + "/" + escapeToken(tok) }

// arrayIndex parses a reference token as an array index: "0" or a decimal
// without leading zeros. "-" (the element after the last) names nothing that
// can be read and is rejected.
func arrayIndex(tok string) (int64, bool) {
	if tok == "" || len(tok) > 15 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	return n, err == nil
}

// unquote decodes a raw JSON string literal.
func unquote(raw []byte) (string, error) {
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}
