package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/state"
)

const (
	adminToken = "admin-token-0123456789abcdef0123456789"
	jwtSecret  = "jwt-secret-0123456789abcdef0123456789abcdef"
	issuer     = "https://idp.example/"
)

type env struct {
	srv       *httptest.Server
	incident  *policy.Incident
	approvals *policy.Approvals
	mu        sync.Mutex
	actions   []Action
	denies    []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	kv := state.NewMemory(nil)
	in, err := policy.NewIncident(policy.IncidentOptions{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := policy.NewApprovals(policy.ApprovalOptions{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewVerifier(identity.Config{Issuers: []identity.IssuerConfig{{Name: "corp", Issuer: issuer,
		Audiences: []string{"quiver-admin"}, Alg: identity.AlgHS256, HS256SecretEnv: "S"}}},
		identity.Options{Getenv: func(string) string { return jwtSecret }, Revoked: in.Revoked})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{incident: in, approvals: ap}
	h, err := New(Options{Incident: in, Approvals: ap, Token: []byte(adminToken), Verifier: v,
		AdminClaim: Claim{Name: "roles", Value: "quiver-admin"},
		OnAction: func(_ *http.Request, a Action) {
			e.mu.Lock()
			e.actions = append(e.actions, a)
			e.mu.Unlock()
		},
		OnDeny: func(_ *http.Request, reason string) {
			e.mu.Lock()
			e.denies = append(e.denies, reason)
			e.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(Prefix, h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func jwtFor(t *testing.T, sub string, roles ...string) string {
	t.Helper()
	c := jwt.MapClaims{"iss": issuer, "sub": sub, "aud": "quiver-admin", "exp": time.Now().Add(time.Hour).Unix(), "jti": "j-" + sub}
	if len(roles) > 0 {
		c["roles"] = roles
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(jwtSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// do sends a request and decodes the JSON answer.
func (e *env) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object", method, path, data)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatal("no Cache-Control: no-store")
	}
	return resp.StatusCode, out
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		token  string
		status int
	}{
		{"no token", "", 401},
		{"wrong admin token", adminToken + "x", 401},
		{"garbage", "not-a-jwt", 401},
		{"admin token", adminToken, 200},
		{"admin JWT", jwtFor(t, "root", "viewer", "quiver-admin"), 200},
		{"JWT without the claim", jwtFor(t, "mallory", "viewer"), 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.do(t, "GET", "/admin/v1/incident", tc.token, "")
			if status != tc.status {
				t.Fatalf("status %d (%v), want %d", status, body, tc.status)
			}
			if status == 401 && body["error"] != "unauthorized" {
				t.Fatalf("%v", body)
			}
		})
	}
	e.mu.Lock()
	denies, actions := append([]string(nil), e.denies...), append([]Action(nil), e.actions...)
	e.mu.Unlock()
	if len(denies) != 4 || denies[3] != "not_admin" {
		t.Fatalf("denies %q", denies)
	}
	if len(actions) != 2 || actions[0].Operator != TokenOperator || actions[1].Operator != "jwt:corp:root" || actions[1].Method != "admin/incident.get" {
		t.Fatalf("actions %+v", actions)
	}
	// A revoked administrator is refused.
	if err := e.incident.RevokePrincipal(context.Background(), "root", "ops", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if status, _ := e.do(t, "GET", "/admin/v1/incident", jwtFor(t, "root", "quiver-admin"), ""); status != 401 {
		t.Fatalf("revoked admin: %d", status)
	}
	// By principal key too.
	if err := e.incident.RevokePrincipal(context.Background(), "jwt:corp:root2", "ops", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if status, _ := e.do(t, "GET", "/admin/v1/incident", jwtFor(t, "root2", "quiver-admin"), ""); status != 401 {
		t.Fatalf("admin revoked by key: %d", status)
	}
}

func TestIncidentEndpoints(t *testing.T) {
	e := newEnv(t)
	tok := adminToken
	high := policy.Request{Principal: identity.Principal{Sub: "a", Issuer: "corp", JTI: "jti-1"}, Server: "github", ToolID: "github:delete#1",
		ToolClass: "write", Risk: "HIGH", SessionID: "s-1", Action: policy.ActionCall}
	low := high
	low.Risk, low.ToolClass, low.ToolID = "LOW", "read", "docs:search#2"
	denied := func(r policy.Request) string { _, why := e.incident.Check(context.Background(), r); return why }

	// Incident mode on: high risk denied immediately.
	if s, b := e.do(t, "POST", "/admin/v1/incident", tok, `{"reason":"alert 42"}`); s != 200 || b["ok"] != true {
		t.Fatalf("%d %v", s, b)
	}
	if denied(high) != policy.ReasonIncidentMode || denied(low) != "" {
		t.Fatal("incident mode not in force")
	}
	s, b := e.do(t, "GET", "/admin/v1/incident", tok, "")
	if s != 200 || b["active"] != true || b["mode"].(map[string]any)["reason"] != "alert 42" || b["mode"].(map[string]any)["by"] != TokenOperator {
		t.Fatalf("%v", b)
	}
	if s, _ := e.do(t, "DELETE", "/admin/v1/incident", tok, ""); s != 200 {
		t.Fatal(s)
	}
	if denied(high) != "" {
		t.Fatal("incident mode still on")
	}
	if s, b := e.do(t, "POST", "/admin/v1/incident", tok, `{"deny_min_risk":"HUGE"}`); s != 400 || b["error"] != "invalid_request" {
		t.Fatalf("%d %v", s, b)
	}

	// Kill rules.
	s, b = e.do(t, "POST", "/admin/v1/kill", tok, `{"tool_id":["docs:*"],"reason":"bad release"}`)
	if s != 201 {
		t.Fatalf("%d %v", s, b)
	}
	id := b["value"].(map[string]any)["id"].(string)
	if denied(low) != policy.ReasonKillSwitch {
		t.Fatal("kill rule not in force")
	}
	for _, bad := range []string{`{}`, `{"all":true,"server":["x"]}`, `{"bogus":1}`, `{"by":"me","all":true}`, `[`} {
		if s, b := e.do(t, "POST", "/admin/v1/kill", tok, bad); s != 400 {
			t.Fatalf("%s: %d %v", bad, s, b)
		}
	}
	if s, _ := e.do(t, "DELETE", "/admin/v1/kill/"+id, tok, ""); s != 200 {
		t.Fatal(s)
	}
	if s, b := e.do(t, "DELETE", "/admin/v1/kill/"+id, tok, ""); s != 404 || b["error"] != "not_found" {
		t.Fatalf("%d %v", s, b)
	}
	if denied(low) != "" {
		t.Fatal("kill rule not lifted")
	}

	// Revocations and quarantine.
	for _, c := range []struct {
		path, body, del string
		code            string
	}{
		{"/admin/v1/quarantine", `{"session_id":"s-1","reason":"anomaly"}`, "/admin/v1/quarantine/s-1", policy.ReasonSessionQuarantined},
		{"/admin/v1/revocations/tokens", `{"jti":"jti-1","until":"2999-01-01T00:00:00Z"}`, "/admin/v1/revocations/tokens/jti-1", policy.ReasonTokenRevoked},
		{"/admin/v1/revocations/principals", `{"sub":"jwt:corp:a"}`, "/admin/v1/revocations/principals/jwt:corp:a", policy.ReasonPrincipalRevoked},
	} {
		if s, b := e.do(t, "POST", c.path, tok, c.body); s != 200 {
			t.Fatalf("%s: %d %v", c.path, s, b)
		}
		if got := denied(low); got != c.code {
			t.Fatalf("%s: %q", c.path, got)
		}
		if s, _ := e.do(t, "DELETE", c.del, tok, ""); s != 200 {
			t.Fatalf("%s: %d", c.del, s)
		}
		if got := denied(low); got != "" {
			t.Fatalf("%s still in force: %q", c.del, got)
		}
	}
	for _, bad := range []struct{ path, body string }{
		{"/admin/v1/quarantine", `{}`},
		{"/admin/v1/quarantine", `{"session":"x"}`},
		{"/admin/v1/revocations/tokens", `{"jti":"x","until":"yesterday"}`},
		{"/admin/v1/revocations/tokens", `{"jti":"x","until":"2000-01-01T00:00:00Z"}`},
		{"/admin/v1/revocations/principals", `{"sub":5}`},
	} {
		if s, b := e.do(t, "POST", bad.path, tok, bad.body); s != 400 {
			t.Fatalf("%s %s: %d %v", bad.path, bad.body, s, b)
		}
	}
	if s, _ := e.do(t, "GET", "/admin/v1/nope", tok, ""); s != 404 {
		t.Fatal(s)
	}
	big := `{"reason":"` + strings.Repeat("x", maxBody) + `"}`
	if s, _ := e.do(t, "POST", "/admin/v1/incident", tok, big); s != 400 {
		t.Fatal("oversized body accepted")
	}
	// Every change left a trace for receipts.
	e.mu.Lock()
	defer e.mu.Unlock()
	methods := map[string]bool{}
	for _, a := range e.actions {
		methods[a.Method] = true
	}
	for _, m := range []string{"admin/incident.enable", "admin/incident.disable", "admin/kill.add", "admin/kill.remove",
		"admin/session.quarantine", "admin/session.release", "admin/token.revoke", "admin/token.restore",
		"admin/principal.revoke", "admin/principal.restore"} {
		if !methods[m] {
			t.Errorf("no action %s", m)
		}
	}
}

func TestApprovalEndpoints(t *testing.T) {
	e := newEnv(t)
	alice := identity.Principal{Sub: "alice", Issuer: "corp"}
	req, err := e.approvals.Request(context.Background(), alice, "github:delete_repo#1", "abc", "")
	if err != nil {
		t.Fatal(err)
	}
	s, b := e.do(t, "GET", "/admin/v1/approvals", adminToken, "")
	if s != 200 || len(b["pending"].([]any)) != 1 {
		t.Fatalf("%d %v", s, b)
	}
	if s, b := e.do(t, "GET", "/admin/v1/approvals/"+req.ID, adminToken, ""); s != 200 || b["status"] != "pending" {
		t.Fatalf("%d %v", s, b)
	}
	op := jwtFor(t, "ops-lead", "quiver-admin")
	s, b = e.do(t, "POST", "/admin/v1/approvals/"+req.ID+"/grant", op, "")
	if s != 200 || b["value"].(map[string]any)["decided_by"] != "jwt:corp:ops-lead" {
		t.Fatalf("%d %v", s, b)
	}
	if s, b := e.do(t, "POST", "/admin/v1/approvals/"+req.ID+"/deny", op, ""); s != 409 || b["error"] != "conflict" {
		t.Fatalf("%d %v", s, b)
	}
	if ok, rec, _ := e.approvals.Check(context.Background(), alice, "github:delete_repo#1", "abc"); !ok || rec.DecidedBy != "jwt:corp:ops-lead" {
		t.Fatal("grant did not reach the store")
	}
	if s, _ := e.do(t, "POST", "/admin/v1/approvals/nope/grant", op, ""); s != 404 {
		t.Fatal(s)
	}
	r2, _ := e.approvals.Request(context.Background(), alice, "github:delete_repo#1", "def", "")
	if s, b := e.do(t, "POST", "/admin/v1/approvals/"+r2.ID+"/deny", adminToken, `{}`); s != 200 || b["value"].(map[string]any)["status"] != "denied" {
		t.Fatalf("%d %v", s, b)
	}
}

func TestNewValidates(t *testing.T) {
	in, _ := policy.NewIncident(policy.IncidentOptions{KV: state.NewMemory(nil)})
	for _, o := range []Options{
		{},
		{Incident: in},
		{Incident: in, Token: []byte("short")},
		{Incident: in, Verifier: &identity.Verifier{}},
	} {
		if _, err := New(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// Without approvals, their endpoints say so.
	h, err := New(Options{Incident: in, Token: []byte(adminToken)})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/admin/v1/approvals", nil)
	r.Header.Set("Authorization", "Bearer "+adminToken)
	h.ServeHTTP(w, r)
	if w.Code != 404 {
		t.Fatal(w.Code)
	}
}
