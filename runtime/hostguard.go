package runtime

import (
	"net"
	"net/http"
	"strings"
)

// hostGuard refuses requests whose Host header is not one of the allowed
// hosts, and browser requests from origins not allowed (DNS rebinding and
// cross-site requests against the listener). With no allowed hosts the
// go-sdk's own rule applies: a request that arrived on a loopback address
// must name a loopback host. With no allowed origins, cross-origin browser
// requests are refused (http.CrossOriginProtection).
func hostGuard(hosts, origins []string, next http.Handler) http.Handler {
	allowed := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		allowed[strings.ToLower(h)] = true
	}
	cop := http.NewCrossOriginProtection()
	for _, o := range origins {
		// Validated by the config; an entry the protection refuses is
		// left out rather than widening access.
		_ = cop.AddTrustedOrigin(o)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(allowed) > 0 {
			host := strings.ToLower(r.Host)
			bare := host
			if h, _, err := net.SplitHostPort(host); err == nil {
				bare = h
			}
			if !allowed[host] && !allowed[bare] {
				http.Error(w, "Forbidden: host not allowed", http.StatusForbidden)
				return
			}
		}
		if err := cop.Check(r); err != nil {
			http.Error(w, "Forbidden: cross-origin request not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
