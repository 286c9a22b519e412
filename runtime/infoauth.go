package runtime

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/identity"
)

// infoTokens are the bearer tokens that open the detail of the listener's
// information endpoints (/metrics, /healthz): the metrics token and the
// admin token, each kept as a digest. /healthz names upstreams, and
// /metrics names upstreams and tools, so neither goes to anyone.
type infoTokens struct {
	digests [][sha256.Size]byte
	// guarded is true when /metrics needs a token (listen.metrics_token_env).
	guarded bool
}

// initInfoTokens resolves listen.metrics_token_env (the admin token is
// resolved before).
func (r *Runtime) initInfoTokens() error {
	if len(r.adminToken) > 0 {
		r.info.digests = append(r.info.digests, sha256.Sum256(r.adminToken))
	}
	name := r.cfg.Listen.MetricsTokenEnv
	if name == "" {
		return nil
	}
	tok, ok := r.deps.Getenv(name)
	if !ok || tok == "" {
		return fmt.Errorf("listen.metrics_token_env: environment variable %s is not set", name)
	}
	if len(tok) < admin.MinTokenBytes {
		return fmt.Errorf("listen.metrics_token_env: the token in %s is shorter than %d bytes", name, admin.MinTokenBytes)
	}
	r.info.digests = append(r.info.digests, sha256.Sum256([]byte(tok)))
	r.info.guarded = true
	return nil
}

// opens reports whether req carries one of the tokens.
func (t *infoTokens) opens(req *http.Request) bool {
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	d := sha256.Sum256([]byte(tok))
	found := 0
	for _, want := range t.digests {
		found |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	return found == 1
}

// reasonWrongToken: a request to /metrics carried a bearer token that is
// neither the metrics token nor the admin token.
const reasonWrongToken = "wrong_token"

// guardMetrics refuses /metrics without a token when listen.metrics_token_env
// is set (401, receipted like any refused request).
func (r *Runtime) guardMetrics(next http.Handler) http.Handler {
	if !r.info.guarded {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.info.opens(req) {
			reason := identity.ReasonMissingToken
			if req.Header.Get("Authorization") != "" {
				reason = reasonWrongToken
			}
			r.denyReceipt(req, reason)
			w.Header().Set("WWW-Authenticate", `Bearer realm="quiver metrics"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, req)
	})
}
