package runtime

import (
	"context"
	"regexp"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// tokenKeys are argument names that carry credentials.
var tokenKeys = map[string]bool{
	"authorization": true, "accesstoken": true, "bearer": true, "bearertoken": true, "apikey": true,
	"idtoken": true, "refreshtoken": true, "token": true, "authtoken": true, "clientsecret": true, "xapikey": true,
}

var tokenShape = regexp.MustCompile(`^(?i:bearer\s+)?[A-Za-z0-9._~+/=-]{16,}$`)

// clientToken reports whether decoded arguments carry a token-like value
// under a credential-like key (searched three levels deep).
func clientToken(v any, depth int) bool {
	if depth > 3 {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			norm := strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(k))
			if s, ok := x.(string); ok && tokenKeys[norm] && tokenShape.MatchString(strings.TrimSpace(s)) {
				return true
			}
			if clientToken(x, depth+1) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if clientToken(x, depth+1) {
				return true
			}
		}
	}
	return false
}

// blockClientToken refuses a call whose arguments carry a client token: the
// credential boundary (spec 001 MUST 5) admits upstream credentials only
// from the upstream's own configuration. Nothing was forwarded, so the
// receipt says blocked with passthrough_detected false.
func blockClientToken(ctx context.Context) *Error {
	if c := callerOf(ctx); c != nil {
		c.rc.TokenHandling = receipts.TokenHandling{Mode: receipts.TokenBlocked}
	}
	return newError(CodeClientCredentialRejected, "the arguments carry a credential; quiver never forwards client credentials upstream").
		withDetail("reason_codes", []string{ReasonClientToken})
}
