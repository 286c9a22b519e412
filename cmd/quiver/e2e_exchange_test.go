package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// exchangeEndpoint is an RFC 8693 token endpoint that checks quiver's
// client credentials, records each request's form and answers every valid
// exchange with the one token the upstream accepts.
type exchangeEndpoint struct {
	srv   *httptest.Server
	mu    sync.Mutex
	forms []map[string]string
}

func newExchangeEndpoint(t *testing.T, clientID, secret, issued string) *exchangeEndpoint {
	t.Helper()
	x := &exchangeEndpoint{}
	x.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, sec, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || id != clientID || sec != secret || r.Method != http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		form := map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		x.mu.Lock()
		x.forms = append(x.forms, form)
		x.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if form["grant_type"] != "urn:ietf:params:oauth:grant-type:token-exchange" || form["subject_token"] == "" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_request"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": issued, "token_type": "Bearer", "expires_in": 300,
			"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
	}))
	t.Cleanup(x.srv.Close)
	return x
}

func (x *exchangeEndpoint) requests() []map[string]string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]map[string]string(nil), x.forms...)
}

// Test 4 (token exchange): the upstream gets a token exchanged for the
// caller's (RFC 8693) with its own audience, never the client's token; the
// token endpoint got the client's token as subject_token; the receipt says
// token_handling.mode exchanged.
func TestSafety4_TokenExchange(t *testing.T) {
	const exchanged = "exchanged-token-for-remote"
	upURL, upRecord := startUpstreamHTTP(t, "127.0.0.1:0", exchanged)
	x := newExchangeEndpoint(t, "quiver-gw", "tx-client-secret", exchanged)
	up := fmt.Sprintf(`  - name: remote
    url: %s
    credentials:
      token_exchange:
        token_url: %s/token
        client_id: quiver-gw
        client_secret_env: QUIVER_E2E_TX_SECRET
        scope: remote.call
        gateway_token_env: QUIVER_E2E_GATEWAY_SUBJECT
`, upURL, x.srv.URL)
	e := startSafety(t, up, "QUIVER_E2E_TX_SECRET", "tx-client-secret", "QUIVER_E2E_GATEWAY_SUBJECT", "gateway-subject-token")
	token := hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}})
	alice := e.as(t, token)
	who := listedID(t, alice, listNames(t, alice), "remote", "whoami")
	res, env := execute(t, alice, who, nil)
	if res.IsError {
		t.Fatalf("whoami: %v", env)
	}
	b, _ := json.Marshal(env["result"])
	if !strings.Contains(string(b), "Bearer "+exchanged) {
		t.Fatalf("the upstream did not get the exchanged token: %s", b)
	}
	if strings.Contains(string(b), token) {
		t.Fatalf("the upstream saw the client's token: %s", b)
	}
	data, err := os.ReadFile(upRecord)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(token)) {
		t.Fatal("the client's token reached the upstream")
	}
	// Every request the upstream received (handshake, listings, the call)
	// carried an exchanged token and nothing else.
	for line := range strings.Lines(string(data)) {
		var rec struct {
			Event   string              `json:"event"`
			Headers map[string][]string `json:"headers"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Event != "http" {
			continue
		}
		if a := rec.Headers["Authorization"]; len(a) != 1 || a[0] != "Bearer "+exchanged {
			t.Fatalf("upstream request with Authorization %q", a)
		}
	}
	var callerExchange map[string]string
	for _, f := range x.requests() {
		if f["subject_token"] == token {
			callerExchange = f
		}
		if f["audience"] != upURL || f["scope"] != "remote.call" || f["subject_token_type"] != "urn:ietf:params:oauth:token-type:access_token" {
			t.Fatalf("token endpoint request: %v", f)
		}
	}
	if callerExchange == nil {
		t.Fatalf("the token endpoint never got the client's token as subject_token: %v", x.requests())
	}
	gateway := false
	for _, f := range x.requests() {
		gateway = gateway || f["subject_token"] == "gateway-subject-token"
	}
	if !gateway {
		t.Fatal("listing did not use the gateway's exchanged token")
	}
	r := e.waitReceipt(t, "whoami", func(r map[string]any) bool { return executed(r, who) })
	if field(r, "token_handling.mode") != "exchanged" || field(r, "token_handling.passthrough_detected") != false ||
		field(r, "decision.result") != "allow" || field(r, "outcome.status") != "success" {
		t.Fatalf("receipt: %v", r)
	}
	all, _ := json.Marshal(e.readReceipts(t))
	if bytes.Contains(all, []byte(exchanged)) || bytes.Contains(all, []byte(token)) || bytes.Contains(all, []byte("gateway-subject-token")) {
		t.Fatal("a token reached the receipts")
	}

	// Finding 12c: the exchanged token is cached; revoking the principal
	// drops it from the shared cache at once, so after the revocation is
	// lifted the next call exchanges again instead of reusing it.
	callerExchanges := func() int {
		n := 0
		for _, f := range x.requests() {
			if f["subject_token"] == token {
				n++
			}
		}
		return n
	}
	if res, env := execute(t, alice, who, nil); res.IsError || callerExchanges() != 1 {
		t.Fatalf("second call: %v, %d exchanges (want the cached token)", env, callerExchanges())
	}
	e.adminCall(t, http.MethodPost, "/admin/v1/revocations/principals", map[string]any{"sub": "alice", "reason": "e2e"})
	e.adminCall(t, http.MethodDelete, "/admin/v1/revocations/principals/alice", nil)
	alice = e.as(t, token)
	if res, env := execute(t, alice, who, nil); res.IsError || callerExchanges() != 2 {
		t.Fatalf("after revoke and restore: %v, %d exchanges (want a fresh exchange)", env, callerExchanges())
	}
	e.srv.stop(t, syscall.SIGTERM)
}
