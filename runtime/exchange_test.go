package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/tokenexchange"
)

func TestExchangeConnNeedsAuthenticatedCaller(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("subject_token") == "bad" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		t.Errorf("unexpected exchange")
	}))
	defer srv.Close()
	ex, err := tokenexchange.New(tokenexchange.Config{TokenURL: srv.URL, ClientID: "q", ClientSecret: "s", Audience: "https://up"})
	if err != nil {
		t.Fatal(err)
	}
	x := exchangeConn{ex: ex}
	it := &catalog.Item{}
	check := func(ctx context.Context, want string) {
		t.Helper()
		_, err := x.callTool(ctx, it, nil)
		e := classify(err)
		if e.Code != CodeAuthFailed || e.Retryable || e.Message != want || !neverSent(err) || !noEffect(err) {
			t.Fatalf("err = %+v (%v)", e, err)
		}
	}
	// stdio (local principal, no token) and anonymous callers.
	local := withCaller(context.Background(), &caller{p: identity.Principal{Sub: "me", Issuer: identity.LocalIssuer}})
	check(local, "token exchange needs an authenticated caller")
	check(context.Background(), "token exchange needs an authenticated caller")
	// A refused exchange is AUTH_FAILED with a one-line message.
	c := &caller{p: identity.Principal{Sub: "alice", Issuer: "ci"}, jwt: true, subject: identity.NewSubjectToken("bad")}
	_, err = x.callTool(withCaller(context.Background(), c), it, nil)
	if e := classify(err); e.Code != CodeAuthFailed || !strings.Contains(e.Message, "invalid_grant") || strings.Contains(e.Message, "bad") ||
		!errors.Is(err, tokenexchange.ErrExchange) {
		t.Fatalf("err = %+v", e)
	}
}

func TestSubjectTokenRedacts(t *testing.T) {
	tok := identity.NewSubjectToken("very-secret")
	c := caller{p: identity.Principal{Sub: "alice"}, subject: tok}
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", tok)} {
		if strings.Contains(s, "very-secret") {
			t.Fatalf("token shown: %s", s)
		}
	}
}
