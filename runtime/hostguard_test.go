package runtime

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHostGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	cases := []struct {
		name           string
		hosts, origins []string
		host, origin   string
		fetchSite      string
		want           int
	}{
		{"no lists, plain client", nil, nil, "127.0.0.1:8080", "", "", http.StatusTeapot},
		{"no lists, same origin", nil, nil, "127.0.0.1:8080", "http://127.0.0.1:8080", "same-origin", http.StatusTeapot},
		{"no lists, cross-site browser", nil, nil, "127.0.0.1:8080", "https://evil.example", "cross-site", http.StatusForbidden},
		{"allowed host", []string{"gw.example.com"}, nil, "gw.example.com:443", "", "", http.StatusTeapot},
		{"allowed host with port", []string{"gw.example.com:8443"}, nil, "gw.example.com:8443", "", "", http.StatusTeapot},
		{"host not allowed", []string{"gw.example.com"}, nil, "attacker.example", "", "", http.StatusForbidden},
		{"host case", []string{"GW.example.com"}, nil, "gw.EXAMPLE.com", "", "", http.StatusTeapot},
		{"trusted origin", nil, []string{"https://app.example.com"}, "gw.example.com", "https://app.example.com", "cross-site", http.StatusTeapot},
		{"untrusted origin", nil, []string{"https://app.example.com"}, "gw.example.com", "https://other.example.com", "cross-site", http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := hostGuard(tc.hosts, tc.origins, ok)
			r := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/mcp", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.fetchSite != "" {
				r.Header.Set("Sec-Fetch-Site", tc.fetchSite)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
}

// TestLoopbackGuard: on a loopback listener without allowed hosts, the
// endpoints beside /mcp answer only requests naming a loopback host (DNS
// rebinding); a listener on another address, or a configured host list,
// leaves the decision to hostGuard.
func TestLoopbackGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	loop := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	public := &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 8080}
	cases := []struct {
		name  string
		hosts []string
		local net.Addr
		host  string
		want  int
	}{
		{"loopback, 127.0.0.1", nil, loop, "127.0.0.1:8080", http.StatusTeapot},
		{"loopback, localhost", nil, loop, "localhost:8080", http.StatusTeapot},
		{"loopback, [::1]", nil, loop, "[::1]:8080", http.StatusTeapot},
		{"loopback, rebinding name", nil, loop, "attacker.example:8080", http.StatusForbidden},
		{"public listener", nil, public, "gw.example.com", http.StatusTeapot},
		{"host list decides", []string{"gw.example.com"}, loop, "gw.example.com", http.StatusTeapot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			r.Host = tc.host
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			w := httptest.NewRecorder()
			loopbackGuard(tc.hosts, ok).ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
}
