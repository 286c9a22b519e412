package main

// Capability tokens (spec 004) end to end: the real binary over HTTP with
// two authenticated principals (HS256), a policy whose access declarations
// require a capability for alpha's add and echo, a recording upstream, and
// the token's signing keyring read back from state_dir to mint the tokens
// a test needs (expired, not yet valid). Every refusal is checked to have
// reached nobody: the upstream's record of tools/call does not grow.

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/internal/redistest"
	"github.com/quiver-mcp/quiver/runtime/capability"
)

const capPolicy = `policy_id: caps
rules:
  - {id: everyone, effect: allow}
access:
  - id: fleet
    mode: open
    rules:
      - {tools: ["alpha:add#*"], requires_capability: true}
      - {tools: ["alpha:echo#*"], requires_capability: true, requires_approval: true}
`

type capEnv struct {
	srv      *httpServer
	dir      string
	record   string
	receipts string
	keyFile  string
}

func startCapabilities(t *testing.T, extra ...string) *capEnv {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(capPolicy), 0o644))
	record := filepath.Join(dir, "calls.jsonl")
	cfg := fmt.Sprintf(`mode: gateway
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
policy: {file: policy.yaml, watch_interval: 1s}
admin: {token_env: QUIVER_E2E_ADMIN_TOKEN}
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-record", %q]
%s`, filepath.Join(dir, "state"), upstreamBin, record, strings.Join(extra, "\n"))
	cfgPath := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	t.Setenv("QUIVER_E2E_JWT_SECRET", safetySecret)
	t.Setenv("QUIVER_E2E_ADMIN_TOKEN", safetyAdminToken)
	srv := startHTTP(t, "--config", cfgPath)
	return &capEnv{srv: srv, dir: dir, record: record, receipts: filepath.Join(dir, "state", "receipts"),
		keyFile: filepath.Join(dir, "state", "capability-keys.json")}
}

// principal connects as sub, with the client able to send the capability
// methods.
func (e *capEnv) principal(t *testing.T, sub string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-" + sub, Version: "1"}, nil)
	must(t, mcp.AddSendingCustomMethod[*capRequestParams, *capResult](client, "capabilities/request"))
	must(t, mcp.AddSendingCustomMethod[*capAttenuateParams, *capResult](client, "capabilities/attenuate"))
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + hsToken(t, sub, nil)}}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.url, HTTPClient: hc}, nil)
	must(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// dispatches counts the tools/call of tool that reached the upstream.
func (e *capEnv) dispatches(t *testing.T, tool string) int {
	t.Helper()
	f, err := os.Open(e.record)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	must(t, err)
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["event"] == "call" && m["tool"] == tool {
			n++
		}
	}
	return n
}

type capRequestParams struct {
	mcp.ParamsBase
	Tools     []string       `json:"tools"`
	Duration  int64          `json:"duration,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	HolderKey capability.JWK `json:"holder_key"`
	MaxUses   int            `json:"max_uses,omitempty"`
}

type capAttenuateParams struct {
	mcp.ParamsBase
	Token     string         `json:"token"`
	Proof     string         `json:"proof"`
	Tools     []string       `json:"tools,omitempty"`
	MaxUses   int            `json:"max_uses,omitempty"`
	Duration  int64          `json:"duration,omitempty"`
	Holder    string         `json:"holder,omitempty"`
	HolderKey capability.JWK `json:"holder_key"`
}

type capResult struct {
	mcp.ResultBase
	Status     string   `json:"status"`
	Token      string   `json:"token"`
	JTI        string   `json:"jti"`
	Parent     string   `json:"parent"`
	Tools      []string `json:"tools"`
	JKT        string   `json:"jkt"`
	ApprovalID string   `json:"approval_id"`
}

// holder is a principal's key pair.
type holder struct {
	priv ed25519.PrivateKey
	pub  capability.JWK
}

func newHolder(t *testing.T) holder {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	return holder{priv: priv, pub: capability.PublicJWK(pub)}
}

func (h holder) proof(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	raw, _ := json.Marshal(args)
	p, err := capability.NewProof(h.priv, tool, raw, "", time.Now())
	must(t, err)
	return p
}

// capCall calls tool_execute presenting token and proof; it returns the
// result and its structured content.
func capCall(t *testing.T, cs *mcp.ClientSession, toolID string, args map[string]any, token, proof string) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	p := &mcp.CallToolParams{Name: "tool_execute", Arguments: map[string]any{"tool_id": toolID, "args": args}}
	if token != "" || proof != "" {
		p.Meta = mcp.Meta{}
		if token != "" {
			p.Meta["dev.quiver-mcp/capability"] = token
		}
		if proof != "" {
			p.Meta["dev.quiver-mcp/capability_proof"] = proof
		}
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Errorf("tool_execute: %v", err)
		return &mcp.CallToolResult{IsError: true}, nil
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &m)
	return res, m
}

// reasonOf returns details.reason of a CAPABILITY_INVALID, "" for a
// success.
func reasonOf(t *testing.T, res *mcp.CallToolResult, m map[string]any) string {
	t.Helper()
	if !res.IsError {
		return ""
	}
	if errCode(m) != "CAPABILITY_INVALID" || field(m, "details.code") != float64(-32003) {
		t.Fatalf("not a capability refusal: %v", m)
	}
	r, _ := field(m, "details.reason").(string)
	return r
}

func request(t *testing.T, cs *mcp.ClientSession, p *capRequestParams) (*capResult, error) {
	t.Helper()
	return mcp.CallCustomMethod[*capRequestParams, *capResult](context.Background(), cs, "capabilities/request", p)
}

// TestE2ECapabilityManInTheMiddle is spec 004's attack analysis against
// the real gateway: a token is useless to anyone but its holder, and to
// its holder only with a fresh proof for the very call.
func TestE2ECapabilityManInTheMiddle(t *testing.T) {
	e := startCapabilities(t)
	alice, bob := e.principal(t, "alice"), e.principal(t, "bob")
	add := browseFirst(t, alice, "add two numbers")
	if !strings.HasPrefix(add, "alpha:add") {
		t.Fatalf("browse found %q", add)
	}
	// The card and the hydrated definition say a capability is needed.
	_, hm := callTool(t, alice, "tool_hydrate", map[string]any{"tool_id": add})
	if field(hm, "classification.requires_capability") != true || field(hm, "classification.capability_request.method") != "capabilities/request" {
		t.Fatalf("hydrate does not mark requires_capability: %v", hm)
	}
	_, bm := callTool(t, alice, "tool_browse", map[string]any{"query": "add two numbers"})
	if !hasString(bm["requires_capability"], add) {
		t.Fatalf("browse does not mark requires_capability: %v", bm)
	}
	args := map[string]any{"a": 2, "b": 3}

	// No token: refused, and told how to ask for one.
	res, m := capCall(t, alice, add, args, "", "")
	if reasonOf(t, res, m) != capability.ReasonMissing || !strings.Contains(m["message"].(string), "capabilities/request") ||
		field(m, "details.request.method") != "capabilities/request" {
		t.Fatalf("no token: %v", m)
	}

	a := newHolder(t)
	g, err := request(t, alice, &capRequestParams{Tools: []string{add}, Duration: 600, HolderKey: a.pub, Reason: "e2e"})
	must(t, err)
	if g.Status != "granted" || g.Token == "" || g.Tools[0] != add {
		t.Fatalf("grant: %+v", g)
	}
	// The signing key is published, public part only.
	resp, err := http.Get(e.srv.base + "/.well-known/quiver-capabilities.json")
	must(t, err)
	var jwks capability.KeyFile
	must(t, json.NewDecoder(resp.Body).Decode(&jwks))
	resp.Body.Close()
	_, kid, err := capability.ParseUnverified(g.Token)
	must(t, err)
	if len(jwks.Keys) != 1 || jwks.Keys[0].Kid != kid || jwks.Keys[0].D != "" || jwks.Keys[0].X == "" {
		t.Fatalf("JWKS %+v for kid %s", jwks, kid)
	}
	proof := a.proof(t, add, args)
	if res, m := capCall(t, alice, add, args, g.Token, proof); res.IsError {
		t.Fatalf("alice's call with her token: %v", m)
	}
	if n := e.dispatches(t, "add"); n != 1 {
		t.Fatalf("%d dispatches after alice's call", n)
	}

	other := newHolder(t)
	keys, err := capability.OpenKeyring(e.keyFile)
	must(t, err)
	mint := func(nbf, exp time.Time) string {
		is := &capability.Issuer{Name: "quiver", Keys: keys, Now: func() time.Time { return nbf }}
		tok, _, err := is.Issue(capability.Grant{Holder: "jwt:ci:alice", Key: a.pub, Tools: []string{add}, NotBefore: nbf, ExpiresAt: exp})
		must(t, err)
		return tok
	}
	foreignKeys, err := capability.NewKeyring()
	must(t, err)
	foreign, _, err := (&capability.Issuer{Name: "quiver", Keys: foreignKeys}).Issue(capability.Grant{Holder: "jwt:ci:alice", Key: a.pub, Tools: []string{add}, ExpiresAt: time.Now().Add(time.Hour)})
	must(t, err)
	parts := strings.Split(g.Token, ".")
	var claims map[string]any
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	must(t, json.Unmarshal(body, &claims))
	claims["sub"] = "jwt:ci:bob"
	tamperedBody, _ := json.Marshal(claims)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedBody) + "." + parts[2]
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[0] ^= 1
	forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	for _, c := range []struct {
		name         string
		cs           *mcp.ClientSession
		args         map[string]any
		token, proof string
		want         string
	}{
		{"bob steals alice's token and proof", bob, args, g.Token, proof, capability.ReasonHolderMismatch},
		{"bob steals the token and signs a proof with his key", bob, args, g.Token, other.proof(t, add, args), capability.ReasonHolderMismatch},
		{"alice replays her own proof", alice, args, g.Token, proof, capability.ReasonProofReplayed},
		{"a proof for other arguments", alice, map[string]any{"a": 2, "b": 4}, g.Token, a.proof(t, add, args), capability.ReasonProofMismatch},
		{"a proof signed by another key", alice, args, g.Token, other.proof(t, add, args), capability.ReasonProofKeyMismatch},
		{"no proof", alice, args, g.Token, "", capability.ReasonProofMissing},
		{"expired", alice, args, mint(time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)), a.proof(t, add, args), capability.ReasonExpired},
		{"not yet valid", alice, args, mint(time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)), a.proof(t, add, args), capability.ReasonNotYetValid},
		{"forged signature", alice, args, forged, a.proof(t, add, args), capability.ReasonSignatureInvalid},
		{"tampered claims", alice, args, tampered, a.proof(t, add, args), capability.ReasonSignatureInvalid},
		{"another gateway's key", alice, args, foreign, a.proof(t, add, args), capability.ReasonUnknownKey},
		{"garbage", alice, args, "not-a-token", a.proof(t, add, args), capability.ReasonMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.dispatches(t, "add")
			res, m := capCall(t, c.cs, add, c.args, c.token, c.proof)
			if got := reasonOf(t, res, m); got != c.want {
				t.Fatalf("reason %q, want %q (%v)", got, c.want, m)
			}
			if n := e.dispatches(t, "add"); n != before {
				t.Fatalf("the refused call reached the upstream (%d -> %d dispatches)", before, n)
			}
		})
	}
	// The token for add does not reach echo (requires a capability too).
	echo := browseFirst(t, alice, "echo the given text")
	if res, m := capCall(t, alice, echo, map[string]any{"text": "x"}, g.Token, a.proof(t, echo, map[string]any{"text": "x"})); reasonOf(t, res, m) != capability.ReasonToolNotGranted {
		t.Fatalf("token used for another tool: %v", m)
	}
	if n := e.dispatches(t, "echo"); n != 0 {
		t.Fatalf("echo dispatched %d times", n)
	}

	// Every refusal is receipted with its reason, and no receipt carries
	// the token.
	e.srv.stop(t, syscall.SIGTERM)
	data := e.allReceipts(t)
	if strings.Contains(data, g.Token) || strings.Contains(data, parts[2]) {
		t.Fatal("a receipt carries the token text")
	}
	for _, reason := range []string{"holder_mismatch", "proof_replayed", "proof_mismatch", "expired", "unknown_key", "capability_missing"} {
		if !strings.Contains(data, `"reason":"`+reason+`"`) {
			t.Errorf("no receipt with reason %s", reason)
		}
	}
}

// allReceipts is the text of every receipts file (after the server
// stopped, so everything is flushed).
func (e *capEnv) allReceipts(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	files, err := filepath.Glob(filepath.Join(e.receipts, "*"))
	must(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		b.Write(data)
	}
	if b.Len() == 0 {
		t.Fatalf("no receipts in %s", e.receipts)
	}
	return b.String()
}

// TestE2ECapabilityMaxUsesConcurrent: 32 concurrent calls with a token of
// max_uses 5 through the real gateway: exactly 5 reach the upstream.
func TestE2ECapabilityMaxUsesConcurrent(t *testing.T) {
	e := startCapabilities(t)
	alice := e.principal(t, "alice")
	add := browseFirst(t, alice, "add two numbers")
	a := newHolder(t)
	g, err := request(t, alice, &capRequestParams{Tools: []string{add}, MaxUses: 5, HolderKey: a.pub})
	must(t, err)
	var ok, exhausted atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		args := map[string]any{"a": i, "b": 1}
		proof := a.proof(t, add, args)
		wg.Go(func() {
			res, m := capCall(t, alice, add, args, g.Token, proof)
			switch {
			case !res.IsError:
				ok.Add(1)
			case field(m, "details.reason") == capability.ReasonUsesExhausted:
				exhausted.Add(1)
			default:
				t.Errorf("unexpected: %v", m)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 || exhausted.Load() != 27 {
		t.Fatalf("%d calls succeeded and %d were refused; want 5 and 27", ok.Load(), exhausted.Load())
	}
	if n := e.dispatches(t, "add"); n != 5 {
		t.Fatalf("%d dispatches, want 5", n)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// adminCLI runs `quiver admin ARGS` against e's gateway and returns its
// output.
func (e *capEnv) adminCLI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(quiverBin, append([]string{"admin", "--url", e.srv.base, "--token-env", "QUIVER_E2E_ADMIN_TOKEN"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quiver admin %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestE2ECapabilityApprovalAttenuationRevocation: a capability whose
// access rule needs approval waits in the approvals queue and the
// identical request returns the token once granted; a holder narrows its
// token for another principal (never widening); revoking the parent with
// `quiver admin revoke capability` refuses the next call of the parent
// and of its attenuation, and nothing refused reaches the upstream.
func TestE2ECapabilityApprovalAttenuationRevocation(t *testing.T) {
	e := startCapabilities(t)
	alice, bob := e.principal(t, "alice"), e.principal(t, "bob")
	add := browseFirst(t, alice, "add two numbers")
	echo := browseFirst(t, alice, "echo the given text")
	a, b := newHolder(t), newHolder(t)

	// echo's capability waits for an operator.
	req := &capRequestParams{Tools: []string{echo}, HolderKey: a.pub, Reason: "say hello"}
	g, err := request(t, alice, req)
	must(t, err)
	if g.Status != "pending" || g.ApprovalID == "" || g.Token != "" {
		t.Fatalf("not queued: %+v", g)
	}
	if list := e.adminCLI(t, "approvals", "list"); !strings.Contains(list, g.ApprovalID) || !strings.Contains(list, "capability:"+echo) {
		t.Fatalf("the request is not in the approvals queue: %s", list)
	}
	if pr := adminAt(t, e.srv.base, "GET", "/admin/v1/capabilities/requests/"+g.ApprovalID, nil); pr["reason"] != "say hello" || pr["requester"] != "jwt:ci:alice" {
		t.Fatalf("the operator cannot see what is asked: %v", pr)
	}
	again, err := request(t, alice, req)
	must(t, err)
	if again.Status != "pending" || again.ApprovalID != g.ApprovalID {
		t.Fatalf("a retry before the grant: %+v", again)
	}
	e.adminCLI(t, "approvals", "grant", g.ApprovalID)
	g, err = request(t, alice, req)
	must(t, err)
	if g.Status != "granted" || g.Token == "" {
		t.Fatalf("after the grant: %+v", g)
	}
	hello := map[string]any{"text": "hello"}
	if res, m := capCall(t, alice, echo, hello, g.Token, a.proof(t, echo, hello)); res.IsError {
		t.Fatalf("echo with the approved token: %v", m)
	}

	// Bob gets a capability through the meta-tool (for clients that cannot
	// send custom methods): listed because the policy requires
	// capabilities.
	res, m := callTool(t, bob, "capability_request", map[string]any{"tools": []string{add}, "holder_key": b.pub, "max_uses": 1})
	if res.IsError || m["status"] != "granted" {
		t.Fatalf("capability_request: %v", m)
	}

	// Alice holds add with 4 uses and hands 2 of them to bob, for add only.
	parent, err := request(t, alice, &capRequestParams{Tools: []string{add, echo}[:1], MaxUses: 4, HolderKey: a.pub})
	must(t, err)
	attenuate := func(cs *mcp.ClientSession, p *capAttenuateParams) (*capResult, error) {
		return mcp.CallCustomMethod[*capAttenuateParams, *capResult](context.Background(), cs, "capabilities/attenuate", p)
	}
	proofAtt := func(h holder) string { return h.proof(t, "capabilities/attenuate", map[string]any{}) }
	for name, p := range map[string]*capAttenuateParams{
		"more tools": {Token: parent.Token, Proof: proofAtt(a), Tools: []string{add, echo}, MaxUses: 1, Holder: "jwt:ci:bob", HolderKey: b.pub},
		"more uses":  {Token: parent.Token, Proof: proofAtt(a), MaxUses: 5, Holder: "jwt:ci:bob", HolderKey: b.pub},
		"longer":     {Token: parent.Token, Proof: proofAtt(a), MaxUses: 1, Duration: 48 * 3600, Holder: "jwt:ci:bob", HolderKey: b.pub},
	} {
		if _, err := attenuate(alice, p); err == nil || !strings.Contains(err.Error(), "CAPABILITY_REQUEST_DENIED") {
			t.Errorf("%s: widened: %v", name, err)
		}
	}
	// Bob cannot attenuate alice's token: he is not its holder.
	if _, err := attenuate(bob, &capAttenuateParams{Token: parent.Token, Proof: proofAtt(a), MaxUses: 1, HolderKey: b.pub}); err == nil || !strings.Contains(err.Error(), "holder_mismatch") {
		t.Fatalf("bob attenuated alice's token: %v", err)
	}
	child, err := attenuate(alice, &capAttenuateParams{Token: parent.Token, Proof: proofAtt(a), Tools: []string{add}, MaxUses: 2, Holder: "jwt:ci:bob", HolderKey: b.pub})
	must(t, err)
	if child.Parent != parent.JTI || child.Status != "granted" {
		t.Fatalf("child: %+v", child)
	}
	args := map[string]any{"a": 1, "b": 1}
	if res, m := capCall(t, bob, add, args, child.Token, b.proof(t, add, args)); res.IsError {
		t.Fatalf("bob with the attenuated token: %v", m)
	}
	if res, m := capCall(t, alice, add, args, parent.Token, a.proof(t, add, args)); res.IsError {
		t.Fatalf("alice with the parent: %v", m)
	}

	// Revoke the parent: the next call of each is refused, and reaches
	// nobody.
	out := e.adminCLI(t, "revoke", "capability", parent.JTI, "--reason", "e2e")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("revoke: %s", out)
	}
	before := e.dispatches(t, "add")
	for _, c := range []struct {
		cs    *mcp.ClientSession
		h     holder
		token string
	}{{alice, a, parent.Token}, {bob, b, child.Token}} {
		res, m := capCall(t, c.cs, add, args, c.token, c.h.proof(t, add, args))
		if reasonOf(t, res, m) != capability.ReasonRevoked {
			t.Fatalf("after revocation: %v", m)
		}
	}
	if n := e.dispatches(t, "add"); n != before {
		t.Fatalf("a revoked call reached the upstream")
	}
	// Revoking bob as a holder ends his meta-tool token too.
	e.adminCLI(t, "revoke", "capability", "--holder", "jwt:ci:bob")
	tok, _ := m["token"].(string)
	res, m2 := capCall(t, bob, add, args, tok, b.proof(t, add, args))
	if reasonOf(t, res, m2) != capability.ReasonRevoked {
		t.Fatalf("holder revocation: %v", m2)
	}
	if list := e.adminCLI(t, "capabilities", "revocations"); !strings.Contains(list, parent.JTI) || !strings.Contains(list, "jwt:ci:bob") {
		t.Fatalf("revocation list: %s", list)
	}
	if list := e.adminCLI(t, "capabilities", "list"); strings.Contains(list, parent.Token) || !strings.Contains(list, child.JTI) {
		t.Fatalf("capabilities list: %s", list)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

const privPolicy = `policy_id: priv
rules:
  - {id: everyone, effect: allow}
access:
  - {id: robots, principal: {sub: robot}, mode: open, privilege: restricted}
  - {id: operators, principal: {sub: op}, mode: open, fulfil: true}
  - {id: others, mode: open}
`

// startPrivileges starts the gateway with the alpha registry (echo is a
// document write) and a policy that makes robot restricted and lets op
// fulfil.
func startPrivileges(t *testing.T) *capEnv {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(privPolicy), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "registry"), 0o755))
	data, err := os.ReadFile(filepath.Join("testdata", "registry", "alpha.json"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "registry", "alpha.json"), data, 0o644))
	record := filepath.Join(dir, "calls.jsonl")
	cfg := fmt.Sprintf(`mode: gateway
environment: dev
state_dir: %s
registry: [registry/*.json]
auth:
  issuers:
    - name: ci
      iss: quiver-ci
      audiences: [quiver]
      alg: HS256
      hs256_secret_env: QUIVER_E2E_JWT_SECRET
policy: {file: policy.yaml, watch_interval: 1s}
admin: {token_env: QUIVER_E2E_ADMIN_TOKEN}
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-record", %q]
`, filepath.Join(dir, "state"), upstreamBin, record)
	cfgPath := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	t.Setenv("QUIVER_E2E_JWT_SECRET", safetySecret)
	t.Setenv("QUIVER_E2E_ADMIN_TOKEN", safetyAdminToken)
	srv := startHTTP(t, "--config", cfgPath)
	return &capEnv{srv: srv, dir: dir, record: record, receipts: filepath.Join(dir, "state", "receipts")}
}

// TestE2ERestrictedPrincipal: a restricted principal's call is a request;
// a full principal with the fulfil permission runs it on its behalf
// through every guard; both read the result; a restricted principal (or a
// full one without the permission) cannot fulfil; receipts name
// on_behalf_of, fulfilled_by and request_id.
func TestE2ERestrictedPrincipal(t *testing.T) {
	e := startPrivileges(t)
	robot, op, ann := e.principal(t, "robot"), e.principal(t, "op"), e.principal(t, "ann")
	echo := browseFirst(t, op, "echo the given text")
	if !strings.HasPrefix(echo, "alpha:echo") {
		t.Fatalf("browse found %q", echo)
	}
	if names := listNames(t, robot); !slices.Contains(names, "tool_requests") || !slices.Contains(names, "tool_fulfil") {
		t.Fatalf("the request meta-tools are not listed: %v", names)
	}
	hello := map[string]any{"text": "hello"}
	write := map[string]any{"tool_id": echo, "args": hello,
		"expected_document_hashes": []any{map[string]any{"pointer": "/text", "hash": hexSHA("hello")}}}

	// The write without its idempotency key is refused up front: a
	// request must pass every guard a call would.
	if res, m := callTool(t, robot, "tool_execute", write); !res.IsError || errCode(m) != "IDEMPOTENCY_KEY_REQUIRED" {
		t.Fatalf("keyless write: %v", m)
	}
	write["idempotency_key"] = "robot-1"
	res, m := callTool(t, robot, "tool_execute", write)
	if !res.IsError || errCode(m) != "TOOL_REQUEST_PENDING" {
		t.Fatalf("restricted call: %v", m)
	}
	id, _ := field(m, "details.request_id").(string)
	if id == "" || e.dispatches(t, "echo") != 0 {
		t.Fatalf("request %q, %d dispatches", id, e.dispatches(t, "echo"))
	}

	// The requester sees its request pending; nobody else's.
	_, m = callTool(t, robot, "tool_requests", map[string]any{"request_id": id})
	if m["status"] != "pending" || m["call"] != nil {
		t.Fatalf("requester's view: %v", m)
	}
	if res, m := callTool(t, ann, "tool_requests", map[string]any{"request_id": id}); !res.IsError {
		t.Fatalf("ann read robot's request: %v", m)
	}
	// Neither the restricted principal nor a full one without the
	// permission may fulfil.
	for _, cs := range []*mcp.ClientSession{robot, ann} {
		if res, m := callTool(t, cs, "tool_fulfil", map[string]any{"request_id": id}); !res.IsError || errCode(m) != "POLICY_DENIED" {
			t.Fatalf("fulfilled without the permission: %v", m)
		}
	}
	// The operator lists the pending request with its call, and fulfils it.
	_, m = callTool(t, op, "tool_requests", map[string]any{})
	reqs, _ := m["tool_requests"].([]any)
	if len(reqs) != 1 || field(reqs[0].(map[string]any), "call.idempotency_key") != "robot-1" || field(reqs[0].(map[string]any), "requester") != "jwt:ci:robot" {
		t.Fatalf("operator's list: %v", m)
	}
	res, m = callTool(t, op, "tool_fulfil", map[string]any{"request_id": id})
	if res.IsError || m["status"] != "ok" {
		t.Fatalf("fulfil: %v", m)
	}
	if n := e.dispatches(t, "echo"); n != 1 {
		t.Fatalf("%d dispatches after the fulfilment", n)
	}
	if res, m := callTool(t, op, "tool_fulfil", map[string]any{"request_id": id}); !res.IsError || errCode(m) != "ARGS_INVALID" {
		t.Fatalf("fulfilled twice: %v", m)
	}
	// The requester reads the result with its request id.
	_, m = callTool(t, robot, "tool_requests", map[string]any{"request_id": id})
	if m["status"] != "fulfilled" || m["fulfilled_by"] != "jwt:ci:op" || !strings.Contains(fmt.Sprint(m["result"]), "hello") {
		t.Fatalf("requester's result: %v", m)
	}
	// The call ran as the requester: the idempotency record is robot's.
	// Robot's repeat with the same key is a new request, and its
	// fulfilment (by the same operator) is answered from robot's record
	// without a second dispatch.
	res, m = callTool(t, robot, "tool_execute", write)
	if errCode(m) != "TOOL_REQUEST_PENDING" || !res.IsError {
		t.Fatalf("repeat: %v", m)
	}
	res, m = callTool(t, op, "tool_fulfil", map[string]any{"request_id": field(m, "details.request_id")})
	if res.IsError || field(m, "provenance.idempotent_replay") != true {
		t.Fatalf("the repeat was not answered from robot's idempotency record: %v", m)
	}
	if n := e.dispatches(t, "echo"); n != 1 {
		t.Fatalf("%d dispatches after the repeat", n)
	}
	e.srv.stop(t, syscall.SIGTERM)
	data := e.allReceipts(t)
	if !strings.Contains(data, `"action":"fulfil"`) || !strings.Contains(data, `"on_behalf_of":"jwt:ci:robot"`) ||
		!strings.Contains(data, `"fulfilled_by":"jwt:ci:op"`) || !strings.Contains(data, `"request_id":"`+id+`"`) {
		t.Fatal("no fulfilment receipt with on_behalf_of, fulfilled_by and request_id")
	}
}

// TestE2ECapabilityKeyRotation: `quiver capability keys rotate` adds a
// signing key that the running gateway signs with (within seconds, no
// restart) and publishes; tokens of the old key keep verifying until
// `retire` removes it, after which they are refused (unknown_key).
func TestE2ECapabilityKeyRotation(t *testing.T) {
	e := startCapabilities(t)
	alice := e.principal(t, "alice")
	add := browseFirst(t, alice, "add two numbers")
	a := newHolder(t)
	old, err := request(t, alice, &capRequestParams{Tools: []string{add}, HolderKey: a.pub})
	must(t, err)
	_, oldKid, err := capability.ParseUnverified(old.Token)
	must(t, err)
	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"capability", "keys"}, append(args, "--key-file", e.keyFile)...)...)
		if code != 0 {
			t.Fatalf("capability keys %v: %d %s", args, code, errOut)
		}
		return strings.TrimSpace(out)
	}
	newKid := cli("rotate")
	if newKid == "" || newKid == oldKid {
		t.Fatalf("rotate printed %q (old %q)", newKid, oldKid)
	}
	args := map[string]any{"a": 1, "b": 2}
	// Poll (the gateway looks at its keyring every few seconds) until a
	// grant is signed by the new key.
	deadline := time.Now().Add(60 * time.Second)
	for {
		g, err := request(t, alice, &capRequestParams{Tools: []string{add}, HolderKey: a.pub})
		must(t, err)
		_, kid, _ := capability.ParseUnverified(g.Token)
		if kid == newKid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grants are still signed by %s", kid)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if res, m := capCall(t, alice, add, args, old.Token, a.proof(t, add, args)); res.IsError {
		t.Fatalf("a token of the old key after the rotation: %v", m)
	}
	if list := cli("list"); !strings.Contains(list, oldKid) || !strings.Contains(list, newKid) || strings.Contains(list, `"d"`) {
		t.Fatalf("keys list: %s", list)
	}
	cli("retire", oldKid)
	for {
		res, m := capCall(t, alice, add, args, old.Token, a.proof(t, add, args))
		if reasonOf(t, res, m) == capability.ReasonUnknownKey {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a token of the retired key still verifies: %v", m)
		}
		time.Sleep(250 * time.Millisecond)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// TestE2ECapabilityReplicasShareRedis: two replicas on one Redis with one
// shared keyring: a proof used on one is a replay on the other, max_uses
// counts across both, and a revocation through one refuses the very next
// call on the other.
func TestE2ECapabilityReplicasShareRedis(t *testing.T) {
	rs := redistest.Start(t)
	t.Setenv("QUIVER_E2E_JWT_SECRET", safetySecret)
	t.Setenv("QUIVER_E2E_ADMIN_TOKEN", safetyAdminToken)
	shared := t.TempDir()
	record := filepath.Join(shared, "calls.jsonl")
	keyFile := filepath.Join(shared, "capability-keys.json")
	var reps []*capEnv
	for range 2 {
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(capPolicy), 0o644))
		cfg := fmt.Sprintf(`environment: dev
state_dir: %s
state:
  backend: redis
  redis: {url: %q}
capabilities: {key_file: %q}
auth:
  issuers:
    - name: ci
      iss: quiver-ci
      audiences: [quiver]
      alg: HS256
      hs256_secret_env: QUIVER_E2E_JWT_SECRET
policy: {file: policy.yaml}
admin: {token_env: QUIVER_E2E_ADMIN_TOKEN}
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-record", %q]
`, filepath.Join(dir, "state"), rs.URL(), keyFile, upstreamBin, record)
		path := filepath.Join(dir, "quiver.yaml")
		must(t, os.WriteFile(path, []byte(cfg), 0o644))
		reps = append(reps, &capEnv{srv: startHTTP(t, "--config", path), dir: dir, record: record})
	}
	a, b := reps[0], reps[1]
	onA, onB := a.principal(t, "alice"), b.principal(t, "alice")
	add := browseFirst(t, onA, "add two numbers")
	h := newHolder(t)
	g, err := request(t, onA, &capRequestParams{Tools: []string{add}, MaxUses: 3, HolderKey: h.pub})
	must(t, err)
	args := map[string]any{"a": 1, "b": 2}

	p1 := h.proof(t, add, args)
	if res, m := capCall(t, onA, add, args, g.Token, p1); res.IsError {
		t.Fatalf("use 1 on A: %v", m)
	}
	if res, m := capCall(t, onB, add, args, g.Token, p1); reasonOf(t, res, m) != capability.ReasonProofReplayed {
		t.Fatalf("A's proof replayed on B: %v", m)
	}
	if res, m := capCall(t, onB, add, args, g.Token, h.proof(t, add, args)); res.IsError {
		t.Fatalf("use 2 on B: %v", m)
	}
	if res, m := capCall(t, onA, add, args, g.Token, h.proof(t, add, args)); res.IsError {
		t.Fatalf("use 3 on A: %v", m)
	}
	if res, m := capCall(t, onB, add, args, g.Token, h.proof(t, add, args)); reasonOf(t, res, m) != capability.ReasonUsesExhausted {
		t.Fatalf("use 4 on B: %v", m)
	}
	g2, err := request(t, onB, &capRequestParams{Tools: []string{add}, HolderKey: h.pub})
	must(t, err)
	if res, m := capCall(t, onA, add, args, g2.Token, h.proof(t, add, args)); res.IsError {
		t.Fatalf("B's token on A: %v", m)
	}
	adminAt(t, a.srv.base, "POST", "/admin/v1/capabilities/revocations", map[string]string{"jti": g2.JTI})
	if res, m := capCall(t, onB, add, args, g2.Token, h.proof(t, add, args)); reasonOf(t, res, m) != capability.ReasonRevoked {
		t.Fatalf("revoked on A, used on B: %v", m)
	}
	if n := a.dispatches(t, "add"); n != 4 {
		t.Fatalf("%d dispatches, want 4", n)
	}
}

// TestE2ECapabilityDirectAndDryRun: a directly exposed tool takes the
// token and proof in its call's _meta like tool_execute; a dry run checks
// a token without using it (no proof consumed, no use counted).
func TestE2ECapabilityDirectAndDryRun(t *testing.T) {
	e := startCapabilities(t, `expose: {direct: ["alpha:add*"]}`)
	alice := e.principal(t, "alice")
	direct := idWithPrefix(listNames(t, alice), "alpha")
	if !strings.Contains(direct, "add") {
		t.Fatalf("add is not listed directly: %v", listNames(t, alice))
	}
	add := browseFirst(t, alice, "add two numbers")
	h := newHolder(t)
	g, err := request(t, alice, &capRequestParams{Tools: []string{add}, MaxUses: 1, HolderKey: h.pub})
	must(t, err)
	args := map[string]any{"a": 20, "b": 22}
	call := func(meta mcp.Meta) (*mcp.CallToolResult, map[string]any) {
		res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: direct, Arguments: args, Meta: meta})
		must(t, err)
		var m map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &m)
		return res, m
	}
	if res, m := call(nil); reasonOf(t, res, m) != capability.ReasonMissing {
		t.Fatalf("direct call without a token: %v", m)
	}
	// A dry run with the token: the capability check passes and uses
	// nothing; without it, the check fails.
	_, m := callTool(t, alice, "tool_execute", map[string]any{"tool_id": add, "args": args, "dry_run": true})
	if m["allowed"] != false || !strings.Contains(fmt.Sprint(m["checks"]), "capability") {
		t.Fatalf("dry run without a token: %v", m)
	}
	res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_execute",
		Arguments: map[string]any{"tool_id": add, "args": args, "dry_run": true}, Meta: mcp.Meta{"dev.quiver-mcp/capability": g.Token}})
	must(t, err)
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &m)
	if m["allowed"] != true {
		t.Fatalf("dry run with the token: %v", m)
	}
	// The one use is still there for the real call.
	proof := h.proof(t, add, args)
	if res, m := call(mcp.Meta{"dev.quiver-mcp/capability": g.Token, "dev.quiver-mcp/capability_proof": proof}); res.IsError {
		t.Fatalf("direct call with the token: %v", m)
	}
	if res, m := call(mcp.Meta{"dev.quiver-mcp/capability": g.Token, "dev.quiver-mcp/capability_proof": h.proof(t, add, args)}); reasonOf(t, res, m) != capability.ReasonUsesExhausted {
		t.Fatalf("second direct call: %v", m)
	}
	if n := e.dispatches(t, "add"); n != 1 {
		t.Fatalf("%d dispatches, want 1", n)
	}
	e.srv.stop(t, syscall.SIGTERM)
}
