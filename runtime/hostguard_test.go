package runtime

import (
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
