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

// loopbackGuard applies the go-sdk's rule for /mcp to the listener's other
// endpoints (/healthz, /metrics, the admin API) when no allowed hosts are
// configured: a request that arrived on a loopback address must name a
// loopback host, so a page on another site cannot read them through DNS
// rebinding. With allowed hosts, hostGuard's list decides instead.
func loopbackGuard(hosts []string, next http.Handler) http.Handler {
	if len(hosts) > 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopbackAddr(la) && !isLoopbackHost(r.Host) {
			http.Error(w, "Forbidden: host not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopbackAddr(a net.Addr) bool {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(strings.ToLower(host), "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
