package runtime

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

const (
	testAdminToken   = "admin-token-of-at-least-thirty-two-bytes"
	testMetricsToken = "metrics-token-of-at-least-thirty-two-bytes"
)

// infoRuntime starts a runtime over the static fleet with the admin token
// and, when metrics is set, the metrics token.
func infoRuntime(t *testing.T, metrics bool) (*Runtime, http.Handler, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	rt, _ := startOnly(t, setup(t, config.ModeGateway, staticFleet(t), func(r *rig) {
		r.cfg.Admin.TokenEnv = "T_ADMIN"
		if metrics {
			r.cfg.Listen.MetricsTokenEnv = "T_METRICS"
		}
		r.deps.ReceiptsCopy = buf
		r.deps.Getenv = func(k string) (string, bool) {
			switch k {
			case "T_ADMIN":
				return testAdminToken, true
			case "T_METRICS":
				return testMetricsToken, true
			}
			return "", false
		}
	}))
	return rt, rt.Handler(""), buf
}

func get(h http.Handler, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = "127.0.0.1:8080"
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestHealthzDetail: /healthz answers its status to anyone, and names the
// upstreams, the catalog and the state backend only to a request with the
// metrics or the admin token (#15 finding 8).
func TestHealthzDetail(t *testing.T) {
	for _, metrics := range []bool{false, true} {
		_, h, _ := infoRuntime(t, metrics)
		cases := []struct {
			name, token string
			detail      bool
		}{
			{"no token", "", false},
			{"a wrong token", "not-the-token-of-at-least-thirty-two-b", false},
			{"the admin token", testAdminToken, true},
			{"the metrics token", testMetricsToken, metrics},
		}
		for _, tc := range cases {
			w := get(h, "/healthz", tc.token)
			var body map[string]any
			if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &body) != nil || body["status"] != "ok" {
				t.Fatalf("metrics token %v, %s: %d %s", metrics, tc.name, w.Code, w.Body)
			}
			_, named := body["upstreams"]
			if named != tc.detail || (!tc.detail && (len(body) != 1 || strings.Contains(w.Body.String(), "fleet"))) {
				t.Fatalf("metrics token %v, %s: detail %v, want %v: %s", metrics, tc.name, named, tc.detail, w.Body)
			}
		}
	}
}

// TestMetricsToken: with listen.metrics_token_env /metrics needs that token
// or the admin token, and each refusal is receipted; without it /metrics
// stays open.
func TestMetricsToken(t *testing.T) {
	rt, h, buf := infoRuntime(t, true)
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a wrong token", "not-the-token-of-at-least-thirty-two-b", http.StatusUnauthorized},
		{"the metrics token", testMetricsToken, http.StatusOK},
		{"the admin token", testAdminToken, http.StatusOK},
	} {
		w := get(h, "/metrics", tc.token)
		if w.Code != tc.want {
			t.Fatalf("%s: %d, want %d", tc.name, w.Code, tc.want)
		}
		if tc.want == http.StatusOK && !strings.Contains(w.Body.String(), "quiver_http_sessions_open") {
			t.Fatalf("%s: no metrics: %s", tc.name, w.Body)
		}
		if tc.want != http.StatusOK && (w.Header().Get("WWW-Authenticate") == "" || strings.Contains(w.Body.String(), "fleet")) {
			t.Fatalf("%s: refusal %v %s", tc.name, w.Header(), w.Body)
		}
	}
	var denied []receipts.Receipt
	for _, rc := range receiptsOf(t, rt, buf) {
		if rc.Decision.Result == "deny" && rc.Outcome.Message == "GET /metrics" {
			denied = append(denied, rc)
		}
	}
	if len(denied) != 2 || !slices.Contains(denied[0].Decision.ReasonCodes, "missing_token") || !slices.Contains(denied[1].Decision.ReasonCodes, reasonWrongToken) {
		t.Fatalf("refusal receipts %+v", denied)
	}

	_, open, _ := infoRuntime(t, false)
	if w := get(open, "/metrics", ""); w.Code != http.StatusOK {
		t.Fatalf("/metrics without a metrics token configured: %d", w.Code)
	}
}

// TestMetricsTokenRequired: a metrics token that is unset or short stops
// the runtime from being built.
func TestMetricsTokenRequired(t *testing.T) {
	for name, val := range map[string]string{"unset": "", "short": "short"} {
		rg := setup(t, config.ModeGateway, staticFleet(t), func(r *rig) {
			r.cfg.Listen.MetricsTokenEnv = "T_METRICS"
			r.deps.Getenv = func(k string) (string, bool) { return val, val != "" }
		})
		if _, err := New(rg.cfg, rg.deps); err == nil || !strings.Contains(err.Error(), "metrics_token_env") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
