package identity

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzAuthorization: no Authorization header value panics the middleware
// or authenticates a request, except the genuine token it is seeded with.
func FuzzAuthorization(f *testing.F) {
	fx := newFixture(f)
	good := sign(f, jwt.SigningMethodHS256, []byte(testSecret), "", claims(issHS, nil))
	for _, s := range []string{"", "Bearer", "Bearer ", "Bearer a.b.c", "Bearer " + good + "x", "Basic Zm9vOmJhcg==",
		"Bearer eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2NpLmV4YW1wbGUvIiwic3ViIjoieCJ9.", "bearer\t" + good, good} {
		f.Add(s)
	}
	h := fx.v.Middleware(MiddlewareOptions{})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	f.Fuzz(func(t *testing.T, header string) {
		if header == "Bearer "+good || header == "bearer "+good || header == "BEARER "+good {
			return
		}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header["Authorization"] = []string{header}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("header %q got status %d", header, w.Code)
		}
		// Verify takes a bare token: the one valid token verifies (the
		// middleware above still refused it without its Bearer scheme);
		// nothing else may.
		if _, err := fx.v.Verify(context.Background(), header); err == nil && header != good {
			t.Fatalf("token %q verified", header)
		}
	})
}
