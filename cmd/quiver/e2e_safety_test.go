package main

// The conformance suite of spec 001 (CSP Tool Safety Profile, MCP gateway
// minimum conformance): the real binary over HTTP with real JWTs (HS256
// with a secret from the environment, RS256 with a JWKS file), a policy
// file, the admin API, and the receipts files read back.
//
// Spec tests covered: 1, 2, 3, 4, 6, 9, 10; 7 and 8 in e2e_argguard_test.go
// as far as argument guards reach (no sandbox yet: receipts say fs_policy
// and net_policy none). Not applicable: 5 (quiver does no OAuth proxying or
// dynamic client registration: MUST 6 is N/A).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	safetySecret     = "e2e-hs256-secret-of-at-least-32-bytes!!"
	safetyAdminToken = "e2e-admin-token-of-at-least-32-bytes!!!"
)

// safetyPolicy: SREs may do everything; bob may use the math tools of the
// static catalog; writes of alpha need an approval; everything else is
// denied (no matching rule).
const safetyPolicy = `policy_id: e2e
rules:
  - id: sre-everything
    priority: 100
    effect: allow
    match: {principal: {claims: {groups: [sre]}}}
  - id: alpha-add-approval
    priority: 90
    effect: require_approval
    match: {principal: {sub: carol}, tool_id: ["alpha:add#*"]}
  - id: bob-math
    effect: allow
    match: {principal: {sub: bob}, server: [math]}
  - id: carol-list
    effect: allow
    match: {principal: {sub: carol}, action: [list]}
`

type safetyEnv struct {
	srv      *httpServer
	dir      string
	record   string
	rsaKey   *rsa.PrivateKey
	receipts string
}

// startSafety starts quiver in proxy mode with auth, a policy, the admin
// API and receipts; extraUpstreams is YAML appended to the upstream list.
func startSafety(t *testing.T, extraUpstreams string, env ...string) *safetyEnv {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []any{map[string]any{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	must(t, os.WriteFile(filepath.Join(dir, "jwks.json"), jwks, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(safetyPolicy), 0o644))
	fleet := mustAbs(t, "../../runtime/testdata/fleet.json")
	record := filepath.Join(dir, "calls.jsonl")
	cfg := fmt.Sprintf(`mode: proxy
environment: dev
state_dir: %s
log: {level: debug}
auth:
  issuers:
    - name: ci
      iss: quiver-ci
      audiences: [quiver]
      alg: HS256
      hs256_secret_env: QUIVER_E2E_JWT_SECRET
    - name: corp
      iss: https://idp.e2e.test/
      audiences: [quiver]
      alg: RS256
      jwks_file: jwks.json
policy: {file: policy.yaml, watch_interval: 1s}
admin: {token_env: QUIVER_E2E_ADMIN_TOKEN}
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-record", %q]
    risk: HIGH
  - name: fleet
    catalog: %q
    risk: LOW
%s`, filepath.Join(dir, "state"), upstreamBin, record, fleet, extraUpstreams)
	cfgPath := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	t.Setenv("QUIVER_E2E_JWT_SECRET", safetySecret)
	t.Setenv("QUIVER_E2E_ADMIN_TOKEN", safetyAdminToken)
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	srv := startHTTP(t, "--config", cfgPath)
	return &safetyEnv{srv: srv, dir: dir, record: record, rsaKey: key, receipts: filepath.Join(dir, "state", "receipts")}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// hsToken mints an HS256 token of the ci issuer.
func hsToken(t *testing.T, sub string, extra jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"iss": "quiver-ci", "aud": "quiver", "sub": sub, "jti": "jti-" + sub,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "actor_type": "agent", "client_id": "e2e"}
	for k, v := range extra {
		c[k] = v
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(safetySecret))
	must(t, err)
	return s
}

// rsToken mints an RS256 token of the corp issuer (JWKS file).
func (e *safetyEnv) rsToken(t *testing.T, sub string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "https://idp.e2e.test/", "aud": "quiver", "sub": sub,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(e.rsaKey)
	must(t, err)
	return s
}

// as connects an MCP session presenting token.
func (e *safetyEnv) as(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	return e.asAt(t, token, nil)
}

// asAt is as with session options (nil: the go-sdk's defaults).
func (e *safetyEnv) asAt(t *testing.T, token string, so *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + token}}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.url, HTTPClient: hc}, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// listedAs returns the entry proxy mode lists for tool name of namespace
// ns: its SEP-986 name "<ns>.<name>.<10 hex>" (never the tool_id, whose
// ':' and '#' SEP-986 does not allow), or "" when it is not listed.
func listedAs(names []string, ns, name string) string {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(ns+"."+name) + `\.[0-9a-f]{10}$`)
	for _, n := range names {
		if re.MatchString(n) {
			return n
		}
	}
	return ""
}

// listedID resolves the entry listed for tool name of namespace ns to its
// tool_id with tool_hydrate, which takes the listed name; "" when the tool
// is not listed.
func listedID(t *testing.T, cs *mcp.ClientSession, names []string, ns, name string) string {
	t.Helper()
	w := listedAs(names, ns, name)
	if w == "" {
		return ""
	}
	res, m := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": w})
	id, _ := m["id"].(string)
	if res.IsError || !strings.HasPrefix(id, ns+":"+name+"#") {
		t.Fatalf("tool_hydrate(%s) = %v", w, m)
	}
	return id
}

// executed reports whether receipt r is of a tool_execute of toolID (not
// the tool_hydrate that listedID resolved it with).
func executed(r map[string]any, toolID string) bool {
	return field(r, "mcp.method") == "tools/call:tool_execute" && field(r, "mcp.tool_id") == toolID
}

func idWithPrefix(names []string, prefix string) string {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return n
		}
	}
	return ""
}

// readReceipts waits until a receipt matching pred is written, and returns
// every receipt written so far.
func (e *safetyEnv) waitReceipt(t *testing.T, what string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, r := range e.readReceipts(t) {
			if pred(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receipt for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *safetyEnv) readReceipts(t *testing.T) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(e.receipts, "receipts-*.jsonl"))
	var out []map[string]any
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				out = append(out, m)
			}
		}
	}
	return out
}

func field(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func hasString(v any, s string) bool {
	l, _ := v.([]any)
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// adminCall sends one admin API request with the admin token.
func (e *safetyEnv) adminCall(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	return adminAt(t, e.srv.base, method, path, body)
}

func errCode(m map[string]any) string { s, _ := m["error"].(string); return s }

// Test 1: principal A without permission to tool X does not see it in
// tools/list; principal B with permission does. Browse-equivalent
// hydrate hides it too.
func TestSafety1_IdentityFilteredDiscovery(t *testing.T) {
	e := startSafety(t, "")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	bob := e.as(t, e.rsToken(t, "bob"))

	all := listNames(t, alice)
	add := listedID(t, alice, all, "alpha", "add")
	mathAdd := listedID(t, alice, all, "math", "add")
	if add == "" || mathAdd == "" {
		t.Fatalf("alice (sre) does not see every tool: %v", all)
	}
	seen := listNames(t, bob)
	if idWithPrefix(seen, "alpha.") != "" || listedAs(seen, "math", "add") == "" || idWithPrefix(seen, "github.") != "" {
		t.Fatalf("bob's tools/list is not filtered to math: %v", seen)
	}
	// The meta-tools stay listed.
	if idWithPrefix(seen, "tool_execute") == "" {
		t.Fatalf("bob lost the meta-tools: %v", seen)
	}
	// Hydrating a hidden tool reads like a missing one, by tool_id or by
	// its listed name.
	if _, m := callTool(t, bob, "tool_hydrate", map[string]any{"tool_id": add}); errCode(m) != "HYDRATE_FAILED" {
		t.Fatalf("bob hydrated a hidden tool: %v", m)
	}
	if _, m := callTool(t, bob, "tool_hydrate", map[string]any{"tool_id": listedAs(all, "alpha", "add")}); errCode(m) != "HYDRATE_FAILED" {
		t.Fatalf("bob hydrated a hidden tool by its listed name: %v", m)
	}
	if res, m := callTool(t, bob, "tool_hydrate", map[string]any{"tool_id": mathAdd}); res.IsError {
		t.Fatalf("bob cannot hydrate math:add: %v", m)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Test 2: no policy match results in DENY with a reason code, and an
// unknown tool is denied too.
func TestSafety2_PerCallAuthz(t *testing.T) {
	e := startSafety(t, "")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	add := listedID(t, alice, listNames(t, alice), "alpha", "add")
	dave := e.as(t, hsToken(t, "dave", nil))

	// dave may not see alpha:add: his call is denied, and answered
	// exactly as a call of a tool that does not exist (#15 finding 7);
	// the deny receipt carries the policy's reason code.
	res, m := execute(t, dave, add, map[string]any{"a": 1, "b": 2})
	if !res.IsError || errCode(m) != "HYDRATE_FAILED" {
		t.Fatalf("dave's call was not denied: %v", m)
	}
	_, missing := execute(t, dave, "alpha:nope#00000000", map[string]any{"a": 1, "b": 2})
	if errCode(missing) != "HYDRATE_FAILED" || strings.ReplaceAll(fmt.Sprint(m), add, "X") != strings.ReplaceAll(fmt.Sprint(missing), "alpha:nope#00000000", "X") {
		t.Fatalf("invisible tool %v, unknown tool %v", m, missing)
	}
	e.waitReceipt(t, "dave's deny", func(r map[string]any) bool {
		return field(r, "mcp.tool_id") == add && field(r, "decision.result") == "deny" &&
			hasString(field(r, "decision.reason_codes"), "NO_MATCHING_RULE") && hasString(field(r, "decision.reason_codes"), "CONCEALED")
	})
	// The denied call never reached the upstream.
	if data, _ := os.ReadFile(e.record); bytes.Contains(data, []byte(`"add"`)) {
		t.Fatalf("a denied call reached the upstream: %s", data)
	}
	// The allowed principal's call proceeds.
	if res, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2}); res.IsError {
		t.Fatalf("alice's call failed: %v", m)
	}
	r := e.waitReceipt(t, "dave's deny", func(r map[string]any) bool {
		return field(r, "principal.sub") == "dave" && executed(r, add)
	})
	if field(r, "decision.result") != "deny" || field(r, "decision.policy_id") != "e2e" || !hasString(field(r, "decision.reason_codes"), "NO_MATCHING_RULE") {
		t.Fatalf("receipt: %v", r)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// startRemote starts an HTTP upstream that records headers and requires
// its own configured token.
func startRemote(t *testing.T) (yaml, record string) {
	url, record := startUpstreamHTTP(t, "127.0.0.1:0", "upstream-secret")
	return fmt.Sprintf("  - name: remote\n    url: %s\n    credentials: {bearer_env: REMOTE_TOKEN}\n", url), record
}

// Test 3: the client's token is stripped; receipts show
// passthrough_detected false. A token-like argument is refused.
func TestSafety3_NoTokenPassthrough(t *testing.T) {
	up, upRecord := startRemote(t)
	e := startSafety(t, up, "REMOTE_TOKEN", "upstream-secret")
	token := hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}})
	alice := e.as(t, token)
	who := listedID(t, alice, listNames(t, alice), "remote", "whoami")
	res, env := execute(t, alice, who, nil)
	if res.IsError {
		t.Fatalf("whoami: %v", env)
	}
	b, _ := json.Marshal(env["result"])
	if strings.Contains(string(b), token) {
		t.Fatalf("the upstream saw the client's token: %s", b)
	}
	echo := listedID(t, alice, listNames(t, alice), "remote", "echo")
	if _, m := execute(t, alice, echo, map[string]any{"text": "hi", "access_token": token}); errCode(m) != "CLIENT_CREDENTIAL_REJECTED" {
		t.Fatalf("a token in the arguments was not refused: %v", m)
	}
	if data, _ := os.ReadFile(upRecord); bytes.Contains(data, []byte(token)) {
		t.Fatal("the client's token reached the upstream")
	}
	r := e.waitReceipt(t, "whoami", func(r map[string]any) bool { return executed(r, who) })
	if field(r, "token_handling.passthrough_detected") != false {
		t.Fatalf("receipt: %v", r)
	}
	r = e.waitReceipt(t, "blocked token", func(r map[string]any) bool { return executed(r, echo) })
	if field(r, "token_handling.mode") != "blocked" || field(r, "token_handling.passthrough_detected") != false || field(r, "decision.result") != "deny" {
		t.Fatalf("receipt: %v", r)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Test 4: the upstream gets its own configured (vault) credential, never
// the client's token; the receipt says token_handling.mode vault.
func TestSafety4_PerServerCredential(t *testing.T) {
	up, upRecord := startRemote(t)
	e := startSafety(t, up, "REMOTE_TOKEN", "upstream-secret")
	token := hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}})
	alice := e.as(t, token)
	who := listedID(t, alice, listNames(t, alice), "remote", "whoami")
	res, env := execute(t, alice, who, nil)
	if res.IsError {
		t.Fatalf("whoami: %v", env)
	}
	b, _ := json.Marshal(env["result"])
	if !strings.Contains(string(b), "Bearer upstream-secret") {
		t.Fatalf("the upstream did not get its own credential: %s", b)
	}
	if data, _ := os.ReadFile(upRecord); bytes.Contains(data, []byte(token)) {
		t.Fatal("the client's token reached the upstream")
	}
	r := e.waitReceipt(t, "whoami", func(r map[string]any) bool { return executed(r, who) })
	if field(r, "token_handling.mode") != "vault" || field(r, "decision.result") != "allow" || field(r, "outcome.status") != "success" {
		t.Fatalf("receipt: %v", r)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Test 6: unknown fields, oversized payloads and malformed arguments are
// rejected before execution, each with a deny receipt.
func TestSafety6_SchemaValidation(t *testing.T) {
	e := startSafety(t, "")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	names := listNames(t, alice)
	mathAdd := listedID(t, alice, names, "math", "add") // additionalProperties: false
	cases := []struct {
		name string
		args any
	}{
		{"unknown field", map[string]any{"tool_id": mathAdd, "args": map[string]any{"a": 1, "b": 2, "evil": true}}},
		{"malformed", map[string]any{"tool_id": mathAdd, "args": map[string]any{"a": "one", "b": 2}}},
		{"not an object", map[string]any{"tool_id": mathAdd, "args": "a=1"}},
	}
	for _, c := range cases {
		res, m := callTool(t, alice, "tool_execute", c.args)
		if !res.IsError || errCode(m) != "ARGS_INVALID" {
			t.Fatalf("%s: %v", c.name, m)
		}
	}
	// Oversized: refused at the HTTP edge (413), before any MCP routing.
	_, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_execute",
		Arguments: map[string]any{"tool_id": mathAdd, "args": map[string]any{"a": 1, "b": 2, "pad": strings.Repeat("x", 5<<20)}}})
	if err == nil || !strings.Contains(err.Error(), "Too Large") {
		t.Fatalf("oversized payload: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, r := range e.readReceipts(t) {
			if field(r, "outcome.error_code") == "ARGS_INVALID" && field(r, "decision.result") == "deny" {
				n++
			}
		}
		if n >= len(cases) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deny receipts for %d rejected calls", n, len(cases))
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Test 9: every allow and deny emits a receipt with the required fields;
// an approval is logged with its approver and time; unauthenticated
// requests are refused with 401 and a receipt.
func TestSafety9_Receipts(t *testing.T) {
	e := startSafety(t, "")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	add := listedID(t, alice, listNames(t, alice), "alpha", "add")

	// Unauthenticated: 401 with a challenge, before any MCP routing.
	resp, err := http.Post(e.srv.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("unauthenticated request: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	e.waitReceipt(t, "401", func(r map[string]any) bool {
		return field(r, "mcp.method") == "http" && field(r, "decision.result") == "deny" && hasString(field(r, "decision.reason_codes"), "missing_token")
	})

	// require_approval -> APPROVAL_REQUIRED; the admin grants; the
	// identical retry proceeds, and its receipt names the approver.
	carol := e.as(t, hsToken(t, "carol", nil))
	args := map[string]any{"a": 2, "b": 3}
	_, m := execute(t, carol, add, args)
	if errCode(m) != "APPROVAL_REQUIRED" {
		t.Fatalf("carol: %v", m)
	}
	id, _ := field(m, "details.approval_id").(string)
	if id == "" {
		t.Fatalf("no approval_id: %v", m)
	}
	e.adminCall(t, "POST", "/admin/v1/approvals/"+id+"/grant", nil)
	if res, m := execute(t, carol, add, args); res.IsError {
		t.Fatalf("the approved retry failed: %v", m)
	}
	// Single use: the next identical call needs a new approval.
	if _, m := execute(t, carol, add, args); errCode(m) != "APPROVAL_REQUIRED" {
		t.Fatalf("approval reused: %v", m)
	}
	r := e.waitReceipt(t, "approved call", func(r map[string]any) bool {
		return field(r, "principal.sub") == "carol" && field(r, "approval.approved_by") != "" && field(r, "approval.approved_by") != nil
	})
	if field(r, "approval.approval_id") != id || field(r, "approval.approved_by") != "admin-token" || field(r, "approval.approved_at") == nil ||
		field(r, "decision.result") != "allow" || field(r, "outcome.status") != "success" {
		t.Fatalf("approved receipt: %v", r)
	}
	e.waitReceipt(t, "approval request", func(r map[string]any) bool {
		return field(r, "principal.sub") == "carol" && field(r, "decision.result") == "require_approval" && field(r, "approval.required") == true
	})
	e.waitReceipt(t, "admin grant", func(r map[string]any) bool {
		m, _ := field(r, "mcp.method").(string)
		return strings.HasPrefix(m, "admin/")
	})

	// Every receipt carries the spec's required fields, and no raw args.
	for _, r := range e.readReceipts(t) {
		for _, f := range []string{"ts", "receipt_id", "trace_id", "principal.sub", "principal.actor_type", "mcp.method", "mcp.trust_level",
			"request.args_hash", "request.size_bytes_in", "decision.result", "decision.policy_id", "decision.reason_codes",
			"token_handling.mode", "token_handling.passthrough_detected", "sandbox.fs_policy", "sandbox.net_policy",
			"approval.required", "outcome.status", "outcome.size_bytes_out", "incident_mode"} {
			if field(r, f) == nil {
				t.Fatalf("receipt without %s: %v", f, r)
			}
		}
		if field(r, "token_handling.passthrough_detected") != false {
			t.Fatalf("passthrough: %v", r)
		}
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), `"a":2`) {
			t.Fatalf("raw arguments in a receipt: %s", b)
		}
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Test 10: the kill switch denies the next call and hides the tool;
// incident mode denies high-risk tools and receipts say so; a revoked
// principal's token fails authentication at once.
func TestSafety10_IncidentKillSwitch(t *testing.T) {
	e := startSafety(t, "")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	names := listNames(t, alice)
	add, mathAdd := listedID(t, alice, names, "alpha", "add"), listedID(t, alice, names, "math", "add")
	if res, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2}); res.IsError {
		t.Fatalf("before the kill: %v", m)
	}
	kill := e.adminCall(t, "POST", "/admin/v1/kill", map[string]any{"server": []string{"alpha"}, "reason": "e2e"})
	_, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2})
	if errCode(m) != "POLICY_DENIED" || !hasString(field(m, "details.reason_codes"), "KILL_SWITCH") {
		t.Fatalf("the kill switch was not in force for the next call: %v", m)
	}
	if idWithPrefix(listNames(t, alice), "alpha.") != "" {
		t.Fatal("killed tools are still listed")
	}
	r := e.waitReceipt(t, "killed call", func(r map[string]any) bool {
		return executed(r, add) && field(r, "decision.result") == "deny"
	})
	if field(r, "incident_mode") != true {
		t.Fatalf("receipt: %v", r)
	}
	killID, _ := field(kill, "value.id").(string)
	if killID == "" {
		t.Fatalf("kill answer: %v", kill)
	}
	e.adminCall(t, "DELETE", "/admin/v1/kill/"+killID, nil)

	// Incident mode: HIGH and above denied, LOW still allowed.
	e.adminCall(t, "POST", "/admin/v1/incident", map[string]any{"reason": "e2e", "deny_min_risk": "HIGH"})
	if _, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2}); errCode(m) != "POLICY_DENIED" || !hasString(field(m, "details.reason_codes"), "INCIDENT_MODE") {
		t.Fatalf("incident mode: %v", m)
	}
	if res, m := execute(t, alice, mathAdd, map[string]any{"a": 1, "b": 2}); res.IsError && errCode(m) == "POLICY_DENIED" {
		t.Fatalf("a LOW tool was denied in incident mode: %v", m)
	}
	e.adminCall(t, "DELETE", "/admin/v1/incident", nil)

	// Revocation: the next request with alice's token is refused.
	e.adminCall(t, "POST", "/admin/v1/revocations/principals", map[string]any{"sub": "alice", "reason": "e2e"})
	req, _ := http.NewRequest("POST", e.srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	req.Header.Set("Authorization", "Bearer "+hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked principal: %d", resp.StatusCode)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// MUST 2: plain HTTP on a non-loopback address is refused without
// --insecure.
func TestSafetyServeRefusesPlainHTTPOffLoopback(t *testing.T) {
	fleet := mustAbs(t, "../../runtime/testdata/fleet.json")
	cmd := exec.Command(quiverBin, "serve", "--catalog", fleet, "--http", "0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v: %s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "--insecure") {
		t.Fatalf("output: %q", out)
	}
}

// Test 9, every request: the black-box probe's cases each leave exactly
// one receipt naming the authenticated caller: initialize, ping, a call of
// an unknown tool, an unknown method and an unknown session (both refused
// by the MCP SDK before dispatch).
func TestSafety9_EveryRequestReceipted(t *testing.T) {
	e := startSafety(t, "")
	token := hsToken(t, "dave", jwt.MapClaims{"groups": []string{"sre"}})
	// Pinned to 2025-11-25: the probe sends a ping and asks about a
	// session, which exist before 2026-07-28 only.
	dave := e.asAt(t, token, legacySession())
	ctx := context.Background()
	must(t, dave.Ping(ctx, nil))
	if _, err := dave.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a call of an unknown tool succeeded")
	}
	raw := func(session, body string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.srv.url, strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := raw(dave.ID(), `{"jsonrpc":"2.0","id":7,"method":"foo/bar","params":{}}`); code < 400 {
		t.Fatalf("unknown method: %d", code)
	}
	if code := raw("no-such-session", `{"jsonrpc":"2.0","id":8,"method":"ping"}`); code != http.StatusNotFound {
		t.Fatalf("unknown session: %d", code)
	}
	want := []struct{ method, result, code string }{
		{"initialize", "allow", ""},
		{"ping", "allow", ""},
		{"tools/call", "deny", "INVALID_PARAMS"},
		{"foo/bar", "deny", "PROTOCOL_ERROR"},
		{"ping", "deny", "SESSION_NOT_FOUND"},
	}
	var got []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = got[:0]
		for _, r := range e.readReceipts(t) {
			if field(r, "principal.sub") == "dave" {
				got = append(got, r)
			}
		}
		if len(got) >= len(want)+1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The client's protocol probe (server/discover, refused at the
	// listener's revision) and listings are not among the requests above.
	var lines []string
	var rest []map[string]any
	for _, r := range got {
		if m, _ := field(r, "mcp.method").(string); strings.HasSuffix(m, "/list") || m == "server/discover" {
			continue
		}
		rest = append(rest, r)
		code, _ := field(r, "outcome.error_code").(string)
		lines = append(lines, strings.TrimSpace(fmt.Sprintf("%v %v %s", field(r, "mcp.method"), field(r, "decision.result"), code)))
	}
	if len(rest) != len(want) {
		t.Fatalf("dave's receipts:\n%s", strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if lines[i] != strings.TrimSpace(w.method+" "+w.result+" "+w.code) {
			t.Errorf("receipt %d = %q, want %q", i, lines[i], w.method+" "+w.result+" "+w.code)
		}
	}
	if field(rest[3], "mcp.session_id") != dave.ID() {
		t.Errorf("the refused request's receipt names session %v, want %s", field(rest[3], "mcp.session_id"), dave.ID())
	}
	e.srv.stop(t, syscall.SIGTERM)
}
