package identity

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// seen records what the protected handler saw.
type seen struct {
	mu        sync.Mutex
	calls     int
	principal Principal
	authz     []string
	tokenInfo *auth.TokenInfo
}

func (s *seen) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		s.principal, _ = FromContext(r.Context())
		s.authz = r.Header.Values("Authorization")
		s.tokenInfo = auth.TokenInfoFromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
}

func TestMiddleware(t *testing.T) {
	f := newFixture(t)
	var denies []string
	var mu sync.Mutex
	s := &seen{}
	h := f.v.Middleware(MiddlewareOptions{OnDeny: func(_ *http.Request, reason string) {
		mu.Lock()
		denies = append(denies, reason)
		mu.Unlock()
	}})(s.handler())
	good := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(issHS, jwt.MapClaims{"scope": "tools:read tools:call"}))
	expired := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(issHS, jwt.MapClaims{"exp": testNow.Add(-time.Hour).Unix()}))

	tests := []struct {
		name    string
		headers []string
		status  int
		reason  string
	}{
		{"no header", nil, 401, ReasonMissingToken},
		{"valid", []string{"Bearer " + good}, 204, ""},
		{"lower-case scheme", []string{"bearer " + good}, 204, ""},
		{"basic scheme", []string{"Basic YWxpY2U6cHc="}, 401, ReasonMalformedHeader},
		{"no token", []string{"Bearer "}, 401, ReasonMissingToken},
		{"two headers", []string{"Bearer " + good, "Bearer " + good}, 401, ReasonMalformedHeader},
		{"trailing junk", []string{"Bearer " + good + " extra"}, 401, ReasonMalformedHeader},
		{"expired", []string{"Bearer " + expired}, 401, ReasonExpired},
		{"oversized header", []string{"Bearer " + strings.Repeat("a", 2*DefaultMaxTokenBytes)}, 401, ReasonTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			denies = nil
			mu.Unlock()
			*s = seen{}
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
			for _, v := range tc.headers {
				r.Header.Add("Authorization", v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if tc.status == 204 {
				if s.calls != 1 || s.principal.Sub != "alice" || len(s.authz) != 0 {
					t.Fatalf("handler saw calls=%d principal=%+v authorization=%q", s.calls, s.principal, s.authz)
				}
				p, ok := FromTokenInfo(s.tokenInfo)
				if !ok || p.Key() != "jwt:ci:alice" || s.tokenInfo.UserID != "jwt:ci:alice" || len(s.tokenInfo.Scopes) != 2 {
					t.Fatalf("token info %+v", s.tokenInfo)
				}
				// The verified token is kept, redacted, for token exchange.
				if st := SubjectTokenFromTokenInfo(s.tokenInfo); st.Reveal() != good || st.String() != "[REDACTED]" {
					t.Fatalf("subject token %v", st)
				}
				if b, _ := json.Marshal(s.tokenInfo); strings.Contains(string(b), good) {
					t.Fatal("the token info encodes the token")
				}
				// The caller's own request keeps its header.
				if r.Header.Get("Authorization") == "" {
					t.Fatal("the middleware modified the caller's request")
				}
				return
			}
			if s.calls != 0 {
				t.Fatal("the protected handler ran for a refused request")
			}
			wa := w.Header().Get("WWW-Authenticate")
			want := `Bearer realm="quiver", error="invalid_token", error_description="` + tc.reason + `"`
			if wa != want {
				t.Fatalf("WWW-Authenticate = %q, want %q", wa, want)
			}
			body := w.Body.String()
			if strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
				t.Fatalf("body is not one line: %q", body)
			}
			var b map[string]string
			if err := json.Unmarshal([]byte(body), &b); err != nil || b["error"] != "invalid_token" || b["error_description"] != tc.reason {
				t.Fatalf("body %q (%v)", body, err)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(denies) != 1 || denies[0] != tc.reason {
				t.Fatalf("OnDeny got %q", denies)
			}
		})
	}
}

func TestMiddlewareResourceMetadata(t *testing.T) {
	f := newFixture(t)
	h := f.v.Middleware(MiddlewareOptions{Realm: "fleet", ResourceMetadataURL: "https://gw.example/.well-known/oauth-protected-resource"})(http.NotFoundHandler())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/mcp", nil))
	want := `Bearer realm="fleet", resource_metadata="https://gw.example/.well-known/oauth-protected-resource", error="invalid_token", error_description="missing_token"`
	if got := w.Header().Get("WWW-Authenticate"); got != want {
		t.Fatalf("got %q", got)
	}
}

// bearerTransport adds a bearer token to every request and records what
// the server answered.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestMiddlewareMCP runs a real go-sdk MCP server behind the middleware
// and checks that a tool handler sees the caller's principal through
// RequestExtra.TokenInfo, never the client's Authorization header, and
// that an unauthenticated client cannot connect.
func TestMiddlewareMCP(t *testing.T) {
	f := newFixture(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	type who struct {
		Key    string `json:"key"`
		Header string `json:"header"`
	}
	server.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var out who
			if req.Extra != nil {
				if p, ok := FromTokenInfo(req.Extra.TokenInfo); ok {
					out.Key = p.Key()
				}
				out.Header = req.Extra.Header.Get("Authorization")
			}
			b, _ := json.Marshal(out)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		})
	var denied []string
	var mu sync.Mutex
	h := f.v.Middleware(MiddlewareOptions{OnDeny: func(_ *http.Request, reason string) {
		mu.Lock()
		denied = append(denied, reason)
		mu.Unlock()
	}})(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	srv := httptest.NewServer(h)
	defer srv.Close()
	good := sign(t, jwt.SigningMethodES256, testEC, "ec-1", claims(issES, jwt.MapClaims{"sub": "agent-7"}))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: bearerTransport{token: good, base: http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var got who
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &got); err != nil {
		t.Fatal(err)
	}
	if got.Key != "jwt:edge:agent-7" || got.Header != "" {
		t.Fatalf("tool handler saw %+v", got)
	}

	// Without a token: refused before any MCP routing.
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated initialize: %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(denied) != 1 || denied[0] != ReasonMissingToken {
		t.Fatalf("denied = %q", denied)
	}
}

// TestMiddlewareStateUnavailable: a token that cannot be checked against
// the revocation state is answered 503 with Retry-After (an outage the
// client retries), not 401 (which would send it to re-authenticate), and
// the protected handler does not run.
func TestMiddlewareStateUnavailable(t *testing.T) {
	f := newFixture(t)
	f.revoked.Store("STATE_DOWN", true)
	var denied []string
	s := &seen{}
	h := f.v.Middleware(MiddlewareOptions{OnDeny: func(_ *http.Request, reason string) { denied = append(denied, reason) }})(s.handler())
	good := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(issHS, nil))
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	r.Header.Set("Authorization", "Bearer "+good)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || w.Header().Get("WWW-Authenticate") != "" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
	if !strings.Contains(w.Body.String(), `"STATE_UNAVAILABLE"`) || s.calls != 0 {
		t.Fatalf("body %q, handler calls %d", w.Body, s.calls)
	}
	if len(denied) != 1 || denied[0] != ReasonStateUnavailable {
		t.Fatalf("OnDeny got %q", denied)
	}
}
