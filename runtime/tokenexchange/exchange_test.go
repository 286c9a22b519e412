package tokenexchange

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

// endpoint is a scripted token endpoint.
type endpoint struct {
	srv    *httptest.Server
	hits   atomic.Int32
	mu     sync.Mutex
	last   *http.Request
	form   map[string]string
	answer func(w http.ResponseWriter)
}

func newEndpoint(t *testing.T, answer func(w http.ResponseWriter)) *endpoint {
	t.Helper()
	e := &endpoint{answer: answer}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		_ = r.ParseForm()
		form := map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		e.mu.Lock()
		e.last, e.form = r, form
		e.mu.Unlock()
		e.answer(w)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func jsonAnswer(status int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

func newExchanger(t *testing.T, e *endpoint, mod func(*Config)) *Exchanger {
	t.Helper()
	cfg := Config{TokenURL: e.srv.URL + "/token", ClientID: "quiver gw", ClientSecret: "s3cr:et", Audience: "https://up.example/mcp", Scope: "a b"}
	if mod != nil {
		mod(&cfg)
	}
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestExchangeRequest(t *testing.T) {
	e := newEndpoint(t, jsonAnswer(200, `{"access_token":"xchg-1","token_type":"Bearer","expires_in":3600,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`))
	x := newExchanger(t, e, nil)
	tok, err := x.Exchange(context.Background(), "jwt:ci:alice", "subject-token", time.Time{})
	if err != nil || tok != "xchg-1" {
		t.Fatalf("Exchange = %q, %v", tok, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	want := map[string]string{
		"grant_type": GrantType, "subject_token": "subject-token", "subject_token_type": TokenTypeAccessToken,
		"audience": "https://up.example/mcp", "scope": "a b",
	}
	if fmt.Sprint(e.form) != fmt.Sprint(want) {
		t.Fatalf("form = %v, want %v", e.form, want)
	}
	if e.last.Method != http.MethodPost || !strings.HasPrefix(e.last.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		t.Fatalf("request %s %q", e.last.Method, e.last.Header.Get("Content-Type"))
	}
	// RFC 6749 §2.3.1: form-urlencoded, then Basic.
	id, secret, ok := e.last.BasicAuth()
	if !ok || id != "quiver+gw" || secret != "s3cr%3Aet" {
		t.Fatalf("basic auth = %q %q %v", id, secret, ok)
	}
}

func TestExchangeJWTSubjectType(t *testing.T) {
	e := newEndpoint(t, jsonAnswer(200, `{"access_token":"x","token_type":"Bearer","expires_in":60}`))
	x := newExchanger(t, e, func(c *Config) { c.SubjectTokenType = TokenTypeJWT; c.Scope = "" })
	if _, err := x.Exchange(context.Background(), "k", "s", time.Time{}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.form["subject_token_type"] != TokenTypeJWT {
		t.Fatalf("form = %v", e.form)
	}
	if _, has := e.form["scope"]; has {
		t.Fatalf("empty scope sent: %v", e.form)
	}
}

func TestExchangeCache(t *testing.T) {
	n := atomic.Int32{}
	e := newEndpoint(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":600}`, n.Add(1))
	})
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	x := newExchanger(t, e, func(c *Config) { c.Now = clock })
	ctx := context.Background()
	get := func(key string, notAfter time.Time) string {
		t.Helper()
		tok, err := x.Exchange(ctx, key, "sub-"+key, notAfter)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if a, b := get("alice", time.Time{}), get("alice", time.Time{}); a != "tok-1" || b != "tok-1" {
		t.Fatalf("cached: %q %q", a, b)
	}
	if got := get("bob", time.Time{}); got != "tok-2" {
		t.Fatalf("per principal: %q", got)
	}
	advance(569 * time.Second) // 600 s lifetime, 30 s margin
	if got := get("alice", time.Time{}); got != "tok-1" {
		t.Fatalf("before the margin: %q", got)
	}
	advance(2 * time.Second)
	if got := get("alice", time.Time{}); got != "tok-3" {
		t.Fatalf("within the margin: %q", got)
	}
	// The subject token's expiry caps the cache.
	if got := get("carol", now.Add(10*time.Second)); got != "tok-4" {
		t.Fatal(got)
	}
	advance(11 * time.Second)
	if got := get("carol", time.Time{}); got != "tok-5" {
		t.Fatalf("past the subject's expiry: %q", got)
	}
	if e.hits.Load() != 5 {
		t.Fatalf("hits = %d", e.hits.Load())
	}
}

func TestExchangeConcurrentShareOneRequest(t *testing.T) {
	release := make(chan struct{})
	e := newEndpoint(t, func(w http.ResponseWriter) {
		<-release
		jsonAnswer(200, `{"access_token":"shared","token_type":"Bearer","expires_in":600}`)(w)
	})
	x := newExchanger(t, e, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			tok, err := x.Exchange(context.Background(), "alice", "s", time.Time{})
			if err == nil && tok != "shared" {
				err = fmt.Errorf("token %q", tok)
			}
			errs <- err
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if h := e.hits.Load(); h != 1 {
		t.Fatalf("hits = %d", h)
	}
}

func TestExchangeErrors(t *testing.T) {
	big := `{"access_token":"` + strings.Repeat("a", DefaultMaxResponseBytes) + `"}`
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   string
	}{
		{"invalid grant", jsonAnswer(400, `{"error":"invalid_grant","error_description":"subject token expired"}`), "token endpoint answered 400 invalid_grant"},
		{"server error", jsonAnswer(500, `oops`), "token endpoint answered 500"},
		{"malformed", jsonAnswer(200, `{"access_token":`), "malformed token endpoint answer"},
		{"not json", func(w http.ResponseWriter) { w.Header().Set("Content-Type", "text/html"); fmt.Fprint(w, "<html>") }, "is not JSON"},
		{"oversized", jsonAnswer(200, big), "larger than"},
		{"no token", jsonAnswer(200, `{"token_type":"Bearer"}`), "no access_token"},
		{"bad token type", jsonAnswer(200, `{"access_token":"x","token_type":"DPoP"}`), "is not Bearer"},
		{"header injection", jsonAnswer(200, `{"access_token":"x\r\nX-Evil: 1","token_type":"Bearer"}`), "cannot carry"},
		{"bad expiry", jsonAnswer(200, `{"access_token":"x","expires_in":"soon"}`), "malformed"},
		{"redirect", func(w http.ResponseWriter) {
			w.Header().Set("Location", "https://elsewhere.example/")
			w.WriteHeader(302)
		}, "answered 302"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEndpoint(t, c.answer)
			x := newExchanger(t, e, nil)
			_, err := x.Exchange(context.Background(), "alice", "the-subject-token", time.Time{})
			if !errors.Is(err, ErrExchange) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || strings.Contains(msg, "the-subject-token") || len(msg) > 300 {
				t.Fatalf("message not one safe line: %q", msg)
			}
			// A failure is not cached.
			_, _ = x.Exchange(context.Background(), "alice", "the-subject-token", time.Time{})
			if e.hits.Load() != 2 {
				t.Fatalf("hits = %d", e.hits.Load())
			}
		})
	}
}

func TestExchangeNoSubjectAndUnreachable(t *testing.T) {
	e := newEndpoint(t, jsonAnswer(200, `{"access_token":"x"}`))
	x := newExchanger(t, e, nil)
	if _, err := x.Exchange(context.Background(), "alice", "", time.Time{}); !errors.Is(err, ErrNoSubject) || !errors.Is(err, ErrExchange) {
		t.Fatalf("err = %v", err)
	}
	if e.hits.Load() != 0 {
		t.Fatal("endpoint called without a subject")
	}
	e.srv.Close()
	if _, err := x.Exchange(context.Background(), "alice", "s", time.Time{}); !errors.Is(err, ErrExchange) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.Exchange(ctx, "bob", "s", time.Time{}); !errors.Is(err, ErrExchange) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{TokenURL: "http://auth.example/token", ClientID: "a", Audience: "x"}, "loopback"},
		{Config{TokenURL: "https://u:p@auth.example/token", ClientID: "a", Audience: "x"}, "credentials"},
		{Config{TokenURL: "https://auth.example/token", Audience: "x"}, "client_id"},
		{Config{TokenURL: "https://auth.example/token", ClientID: "a"}, "audience"},
		{Config{TokenURL: "https://auth.example/token", ClientID: "a", Audience: "x", SubjectTokenType: "saml"}, "not supported"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	for _, ok := range []string{"https://auth.example/token", "http://127.0.0.1:8080/t", "http://localhost/t", "http://[::1]/t"} {
		if _, err := CheckTokenURL(ok); err != nil {
			t.Errorf("CheckTokenURL(%q) = %v", ok, err)
		}
	}
}

// TestExchangeSharedCache: two exchangers with one secret on one KV are
// two replicas: a token exchanged by one is reused by the other; the KV
// holds it only encrypted; a KV that fails means a fresh exchange, never
// a refusal; another secret cannot read the entry and exchanges again.
func TestExchangeSharedCache(t *testing.T) {
	ctx := context.Background()
	n := atomic.Int32{}
	e := newEndpoint(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":600}`, n.Add(1))
	})
	kv := statetest.NewFailing(state.NewMemory(nil))
	a := newExchanger(t, e, func(c *Config) { c.KV = kv })
	b := newExchanger(t, e, func(c *Config) { c.KV = kv })
	if tok, err := a.Exchange(ctx, "alice", "sub", time.Time{}); err != nil || tok != "tok-1" {
		t.Fatal(tok, err)
	}
	if tok, err := b.Exchange(ctx, "alice", "sub", time.Time{}); err != nil || tok != "tok-1" {
		t.Fatalf("the other replica: %q %v", tok, err)
	}
	entries, _ := kv.Scan(ctx, "tx/", 10)
	if len(entries) != 1 || strings.Contains(string(entries[0].Value), "tok-1") {
		t.Fatalf("cache entries %q", entries)
	}
	// A new subject token is a new exchange.
	if tok, _ := b.Exchange(ctx, "alice", "sub2", time.Time{}); tok != "tok-2" {
		t.Fatalf("new subject token: %q", tok)
	}
	kv.SetDown(true)
	if tok, err := a.Exchange(ctx, "alice", "sub", time.Time{}); err != nil || tok != "tok-3" {
		t.Fatalf("with the cache down: %q %v", tok, err)
	}
	kv.SetDown(false)
	other := newExchanger(t, e, func(c *Config) { c.KV = kv; c.ClientSecret = "another" })
	if tok, err := other.Exchange(ctx, "alice", "sub", time.Time{}); err != nil || tok != "tok-4" {
		t.Fatalf("another secret: %q %v", tok, err)
	}
}

// TestForget: revoking a principal (by subject or by key) or a token (by
// jti) drops its cached tokens from the shared KV, so every replica
// exchanges again; other principals' tokens stay.
func TestForget(t *testing.T) {
	ctx := context.Background()
	n := atomic.Int32{}
	e := newEndpoint(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":600}`, n.Add(1))
	})
	kv := state.NewMemory(nil)
	a := newExchanger(t, e, func(c *Config) { c.KV = kv })
	b := newExchanger(t, e, func(c *Config) { c.KV = kv }) // another replica
	alice := Owner{Key: "jwt:ci:alice", JTI: "j-alice"}
	alice2 := Owner{Key: "jwt:corp:alice"}
	bob := Owner{Key: "jwt:ci:bob", JTI: "j-bob"}
	get := func(x *Exchanger, o Owner, sub string) string {
		t.Helper()
		tok, err := x.ExchangeFor(ctx, o, sub, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	fill := func() (string, string, string) {
		return get(a, alice, "s-alice"), get(a, alice2, "s-alice2"), get(a, bob, "s-bob")
	}
	ta, ta2, tb := fill()
	entries, _ := kv.Scan(ctx, "", 100)
	for _, en := range entries {
		if strings.Contains(en.Key, "alice") || strings.Contains(en.Key, "j-") {
			t.Fatalf("a cache key names its owner: %q", en.Key)
		}
	}
	// By key: only that issuer's alice.
	if d, err := b.ForgetPrincipal(ctx, alice.Key); err != nil || d != 1 {
		t.Fatalf("forget key: %d %v", d, err)
	}
	if get(b, alice, "s-alice") == ta || get(b, alice2, "s-alice2") != ta2 || get(b, bob, "s-bob") != tb {
		t.Fatal("forget by key dropped the wrong tokens")
	}
	// By subject: every issuer's alice.
	ta, ta2, tb = fill()
	if d, err := a.ForgetPrincipal(ctx, "alice"); err != nil || d != 2 {
		t.Fatalf("forget subject: %d %v", d, err)
	}
	if get(b, alice, "s-alice") == ta || get(b, alice2, "s-alice2") == ta2 || get(b, bob, "s-bob") != tb {
		t.Fatal("forget by subject dropped the wrong tokens")
	}
	// By jti.
	ta, ta2, tb = fill()
	if d, err := b.ForgetToken(ctx, "j-bob"); err != nil || d != 1 {
		t.Fatalf("forget jti: %d %v", d, err)
	}
	if get(a, alice, "s-alice") != ta || get(a, alice2, "s-alice2") != ta2 || get(a, bob, "s-bob") == tb {
		t.Fatal("forget by jti dropped the wrong tokens")
	}
	if d, err := b.ForgetToken(ctx, "unknown"); err != nil || d != 0 {
		t.Fatalf("unknown jti: %d %v", d, err)
	}
}
