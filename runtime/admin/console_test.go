package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime/callstats"
	"github.com/quiver-mcp/quiver/runtime/capability"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// fleetFixture is a fixed Fleet for the console's handler tests; the
// runtime's own implementation is tested through the real binary.
type fleetFixture struct{}

func (fleetFixture) Upstreams(context.Context) []Upstream {
	return []Upstream{
		{Name: "github", Status: "ready", Protocol: "2025-11-25", Transport: "http", Trust: "verified", Risk: "MEDIUM", Tools: 3,
			Recent: callstats.Stats{Calls: 10, Failed: 1, P50: time.Millisecond, P99: 9 * time.Millisecond}},
		{Name: "files", Status: "down", Reason: "exec: \"srv\": not found", Transport: "stdio", Sandbox: "bwrap: /work rw", Trust: "internal", Risk: "HIGH"},
	}
}

func (fleetFixture) Browse(_ context.Context, as identity.Principal, q BrowseQuery) (BrowsePage, error) {
	if q.Path == "/nope" {
		return BrowsePage{}, errors.New("no catalog path /nope")
	}
	name := "create_issue"
	if as.Sub != "" {
		name = "create_issue_for_" + as.Sub
	}
	return BrowsePage{Cards: []choicecard.Card{{ID: "github:create_issue#34afee88", Name: name, Description: "Open an <issue>", Kind: "tool", Tags: []string{"write"}}}, Total: 1}, nil
}

func (fleetFixture) Tool(_ context.Context, as identity.Principal, id string) (ToolDetail, bool) {
	if id != "github:create_issue#34afee88" || as.Sub == "eve" {
		return ToolDetail{}, false
	}
	return ToolDetail{ID: id, Server: "github", UpstreamName: "create_issue", InputSchema: `{"type": "object"}`, Class: "write",
		Decisions: []Decision{{Action: "call", Effect: "allow", PolicyID: "p", RuleID: "r1"}}}, true
}

type consoleEnv struct {
	srv       *httptest.Server
	incident  *policy.Incident
	approvals *policy.Approvals
	caps      *capability.Store
	requests  *capability.Requests
	kv        state.KV
	dir       string
	now       atomic.Int64
	mu        sync.Mutex
	actions   []Action
	denies    []string
}

func (e *consoleEnv) clock() time.Time { return time.Unix(0, e.now.Load()) }

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	e := &consoleEnv{kv: state.NewMemory(nil), dir: t.TempDir()}
	e.now.Store(time.Now().UnixNano())
	var err error
	if e.incident, err = policy.NewIncident(policy.IncidentOptions{KV: e.kv}); err != nil {
		t.Fatal(err)
	}
	if e.approvals, err = policy.NewApprovals(policy.ApprovalOptions{KV: e.kv}); err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewVerifier(identity.Config{Issuers: []identity.IssuerConfig{{Name: "corp", Issuer: issuer,
		Audiences: []string{"quiver-admin"}, Alg: identity.AlgHS256, HS256SecretEnv: "S"}}},
		identity.Options{Getenv: func(string) string { return jwtSecret }, Revoked: e.incident.Revoked})
	if err != nil {
		t.Fatal(err)
	}
	e.caps, e.requests = capability.NewStore(e.kv, time.Hour), capability.NewRequests(e.kv, time.Hour)
	h, err := NewConsole(ConsoleOptions{Options: Options{Incident: e.incident, Approvals: e.approvals, Token: []byte(adminToken),
		Capabilities: e.caps, ToolRequests: e.requests,
		Verifier: v, AdminClaim: Claim{Name: "roles", Value: "quiver-admin"}, Now: e.clock,
		OnAction: func(_ *http.Request, a Action) { e.mu.Lock(); e.actions = append(e.actions, a); e.mu.Unlock() },
		OnDeny:   func(_ *http.Request, r string) { e.mu.Lock(); e.denies = append(e.denies, r); e.mu.Unlock() }},
		KV: e.kv, Fleet: fleetFixture{}, Receipts: receipts.Reader{Dir: e.dir}, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(ConsolePrefix, h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// browser is a client with a cookie jar that does not follow redirects.
func (e *consoleEnv) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *consoleEnv) get(t *testing.T, c *http.Client, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(e.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (e *consoleEnv) post(t *testing.T, c *http.Client, path string, form url.Values, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login logs c in with token and returns the CSRF token of its session.
func (e *consoleEnv) login(t *testing.T, c *http.Client, token string) string {
	t.Helper()
	code, body, h := e.post(t, c, "/ui/login", url.Values{"token": {token}, "next": {"/ui/incident"}}, nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/incident" {
		t.Fatalf("login: %d %s %v", code, body, h)
	}
	_, page, _ := e.get(t, c, "/ui/incident")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page: %s", page)
	}
	return m[1]
}

func TestConsoleNeedsLogin(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	for _, p := range []string{"/ui/", "/ui/fleet", "/ui/catalog", "/ui/tool?id=x", "/ui/receipts", "/ui/receipt?at=2026-01-01:0", "/ui/approvals", "/ui/incident"} {
		code, _, h := e.get(t, c, p)
		if p == "/ui/" {
			// The root redirects to the fleet, which redirects to login.
			if code != http.StatusSeeOther || h.Get("Location") != "/ui/fleet" {
				t.Fatalf("%s: %d %v", p, code, h.Get("Location"))
			}
			continue
		}
		if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/login?next=") {
			t.Fatalf("%s without a session: %d, Location %q", p, code, h.Get("Location"))
		}
	}
	if code, _, _ := e.get(t, c, "/ui/receipts/stream"); code != http.StatusUnauthorized {
		t.Fatalf("stream without a session: %d", code)
	}
	for _, p := range []string{"/ui/incident/enable", "/ui/kill", "/ui/approvals/x/grant", "/ui/revocations/principal", "/ui/logout"} {
		if code, _, _ := e.post(t, c, p, url.Values{"reason": {"x"}}, nil); code != http.StatusUnauthorized {
			t.Fatalf("POST %s without a session: %d", p, code)
		}
	}
	// A forged cookie is no session.
	u, _ := url.Parse(e.srv.URL)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: "forged", Path: "/ui/"}})
	if code, _, _ := e.get(t, c, "/ui/fleet"); code != http.StatusSeeOther {
		t.Fatalf("forged cookie: %d", code)
	}
	st, _ := e.incident.State(context.Background())
	if st.Mode.Active || len(st.Kill) > 0 {
		t.Fatal("an unauthenticated request changed the incident state")
	}
}

func TestConsoleLogin(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	// The login page itself needs nothing.
	if code, body, h := e.get(t, c, "/ui/login"); code != 200 || !strings.Contains(body, `<label for="token">`) ||
		!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("login page: %d %v", code, h)
	}
	for _, tc := range []struct {
		name, token string
		want        int
		reason      string
	}{
		{"empty", "", 401, identity.ReasonMissingToken},
		{"wrong token", "nope-nope-nope", 401, identity.ReasonMalformedToken},
		{"jwt without the claim", jwtFor(t, "bob"), 403, "not_admin"},
	} {
		code, body, h := e.post(t, c, "/ui/login", url.Values{"token": {tc.token}}, nil)
		if code != tc.want || h.Get("Set-Cookie") != "" || !strings.Contains(body, `role="alert"`) {
			t.Fatalf("%s: %d cookie %q", tc.name, code, h.Get("Set-Cookie"))
		}
		e.mu.Lock()
		last := e.denies[len(e.denies)-1]
		e.mu.Unlock()
		if last != tc.reason {
			t.Fatalf("%s: deny reason %q, want %q", tc.name, last, tc.reason)
		}
	}
	// A cross-site login form is refused.
	if code, _, _ := e.post(t, c, "/ui/login", url.Values{"token": {adminToken}}, map[string]string{"Origin": "https://evil.example"}); code != 403 {
		t.Fatalf("cross-site login: %d", code)
	}
	code, _, h := e.post(t, c, "/ui/login", url.Values{"token": {adminToken}, "next": {"https://evil.example/"}}, nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/fleet" {
		t.Fatalf("login with an outside next: %d %q", code, h.Get("Location"))
	}
	ck := h.Get("Set-Cookie")
	for _, want := range []string{sessionCookie + "=", "HttpOnly", "SameSite=Strict", "Path=/ui/", "Max-Age="} {
		if !strings.Contains(ck, want) {
			t.Fatalf("session cookie %q lacks %q", ck, want)
		}
	}
	if strings.Contains(ck, "Secure") {
		t.Fatalf("plain HTTP cookie marked Secure: %q", ck)
	}
	if code, body, _ := e.get(t, c, "/ui/fleet"); code != 200 || !strings.Contains(body, "admin-token") {
		t.Fatalf("fleet after login: %d", code)
	}
	// The session expires.
	e.now.Add(int64(DefaultConsoleSessionTTL + time.Minute))
	if code, _, _ := e.get(t, c, "/ui/fleet"); code != http.StatusSeeOther {
		t.Fatalf("expired session: %d", code)
	}
}

func TestConsoleLogoutAndRevocation(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	csrf := e.login(t, c, adminToken)
	if code, _, h := e.post(t, c, "/ui/logout", url.Values{"csrf": {csrf}}, nil); code != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Fatalf("logout: %d", code)
	}
	if code, _, _ := e.get(t, c, "/ui/fleet"); code != http.StatusSeeOther {
		t.Fatalf("after logout: %d", code)
	}
	// A JWT operator revoked after logging in is out at the next request.
	j := e.browser(t)
	e.login(t, j, jwtFor(t, "alice", "quiver-admin"))
	if code, _, _ := e.get(t, j, "/ui/fleet"); code != 200 {
		t.Fatalf("jwt operator: %d", code)
	}
	if err := e.incident.RevokePrincipal(context.Background(), "alice", "test", "stolen laptop", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := e.get(t, j, "/ui/fleet"); code != http.StatusSeeOther {
		t.Fatalf("revoked jwt operator: %d", code)
	}
}

func TestConsoleLoginThrottle(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	for i := range loginLimit {
		if code, _, _ := e.post(t, c, "/ui/login", url.Values{"token": {"wrong"}}, nil); code != 401 {
			t.Fatalf("attempt %d: %d", i, code)
		}
	}
	code, _, h := e.post(t, c, "/ui/login", url.Values{"token": {adminToken}}, nil)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("attempt past the limit: %d %v", code, h)
	}
}

func TestConsolePages(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	e.login(t, c, adminToken)
	w, err := receipts.NewWriter(receipts.WriterOptions{Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	rc := receipts.New("tools/call:tool_execute", time.Now())
	rc.Principal.Sub, rc.MCP.ToolID, rc.MCP.ServerID, rc.MCP.ToolName = "mallory", "github:create_issue#34afee88", "github", "create_issue"
	rc.Outcome.ErrorCode = "POLICY_DENIED"
	w.Emit(rc)
	_ = w.Close()
	if _, err := e.approvals.Request(context.Background(), identity.Principal{Sub: "bob"}, "github:create_issue#34afee88", strings.Repeat("ab", 32), "policy p, rule r9: APPROVAL_REQUIRED"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want int
		has  []string
	}{
		{"/ui/fleet", 200, []string{"github", "2025-11-25", "10.0%", "9.00 ms", "files", `exec: &#34;srv&#34;: not found`, "bwrap: /work rw"}},
		{"/ui/catalog", 200, []string{"create_issue", "Open an &lt;issue&gt;"}},
		{"/ui/catalog?q=issue&as=carol&claims=%7B%22groups%22%3A%5B%22eng%22%5D%7D", 200, []string{"create_issue_for_carol"}},
		{"/ui/catalog?q=a&path=/", 400, []string{"not both"}},
		{"/ui/catalog?path=/nope", 400, []string{"no catalog path"}},
		{"/ui/catalog?as=x&claims=%5B1%5D", 400, []string{"JSON object"}},
		{"/ui/catalog?claims=%7B%7D", 400, []string{"need a subject"}},
		{"/ui/tool?id=github:create_issue%2334afee88", 200, []string{"create_issue", "write", "r1", "mallory"}},
		{"/ui/tool?id=github:create_issue%2334afee88&as=eve", 404, nil},
		{"/ui/tool?id=nope", 404, nil},
		{"/ui/receipts", 200, []string{"mallory", "POLICY_DENIED", `data-stream="/ui/receipts/stream?"`}},
		{"/ui/receipts?result=deny&code=POLICY_DENIED&sub=mallory&since=1h", 200, []string{"mallory"}},
		{"/ui/receipts?sub=nobody", 200, []string{"No receipts match"}},
		{"/ui/receipts?result=maybe", 400, []string{"result is allow"}},
		{"/ui/receipts?since=yesterday", 400, []string{"since is a duration"}},
		{"/ui/receipts?tool=x%5C", 400, []string{"tool:"}},
		{"/ui/receipts?before=garbage", 400, []string{"not a receipt position"}},
		{"/ui/receipt?at=garbage", 404, nil},
		{"/ui/receipt?id=" + rc.ReceiptID + "&day=" + rc.TS.UTC().Format(time.DateOnly), 200, []string{rc.ReceiptID, "mallory"}},
		{"/ui/approvals", 200, []string{"bob", strings.Repeat("ab", 32), "/grant", "policy p, rule r9: APPROVAL_REQUIRED"}},
		{"/ui/incident", 200, []string{"Incident mode", "Add kill rule"}},
		{"/ui/static/console.css", 200, []string{"--fg"}},
		{"/ui/static/console.js", 200, []string{"EventSource"}},
		{"/ui/nope", 404, nil},
	}
	for _, tc := range tests {
		code, body, _ := e.get(t, c, tc.path)
		if code != tc.want {
			t.Errorf("%s: %d, want %d", tc.path, code, tc.want)
			continue
		}
		for _, s := range tc.has {
			if !strings.Contains(body, s) {
				t.Errorf("%s lacks %q", tc.path, s)
			}
		}
	}
	// A receipt position from the list opens the receipt.
	_, list, _ := e.get(t, c, "/ui/receipts")
	m := regexp.MustCompile(`/ui/receipt\?at=([^"]+)"`).FindStringSubmatch(list)
	if m == nil {
		t.Fatal("no receipt link")
	}
	at, _ := url.QueryUnescape(strings.TrimPrefix(m[1], "at="))
	if code, body, _ := e.get(t, c, "/ui/receipt?at="+url.QueryEscape(strings.ReplaceAll(at, "&amp;", "&"))); code != 200 || !strings.Contains(body, rc.ReceiptID) {
		t.Fatalf("receipt by position: %d", code)
	}
}

func TestConsoleActions(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	csrf := e.login(t, c, adminToken)
	ctx := context.Background()
	// Refused before anything changes: no CSRF token, a stale one, a
	// cross-site origin, a cross-site fetch.
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no csrf", url.Values{"reason": {"x"}}, nil},
		{"wrong csrf", url.Values{"reason": {"x"}, "csrf": {csrf + "x"}}, nil},
		{"foreign origin", url.Values{"reason": {"x"}, "csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"}},
		{"cross-site fetch", url.Values{"reason": {"x"}, "csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		if code, _, _ := e.post(t, c, "/ui/incident/enable", tc.form, tc.hdr); code != http.StatusForbidden {
			t.Fatalf("%s: %d", tc.name, code)
		}
	}
	if st, _ := e.incident.State(ctx); st.Mode.Active {
		t.Fatal("a refused form turned incident mode on")
	}
	do := func(path string, form url.Values, want int) string {
		t.Helper()
		form.Set("csrf", csrf)
		code, body, h := e.post(t, c, path, form, map[string]string{"Origin": e.srv.URL})
		if code != want {
			t.Fatalf("POST %s: %d, want %d: %s", path, code, want, body)
		}
		return h.Get("Location")
	}
	if loc := do("/ui/incident/enable", url.Values{"reason": {"breach"}, "deny_min_risk": {"HIGH"}}, 303); loc != "/ui/incident?done=incident.enable" {
		t.Fatalf("Location %q", loc)
	}
	st, _ := e.incident.State(ctx)
	if !st.Mode.Active || st.Mode.Reason != "breach" || st.Mode.By != TokenOperator {
		t.Fatalf("incident mode: %+v", st.Mode)
	}
	if _, body, _ := e.get(t, c, "/ui/incident?done=incident.enable"); !strings.Contains(body, "Done: incident.enable") || !strings.Contains(body, "breach") {
		t.Fatal("the incident page does not show the change")
	}
	do("/ui/incident/disable", url.Values{}, 303)
	do("/ui/kill", url.Values{"server": {"github, slack*"}, "reason": {"leak"}}, 303)
	st, _ = e.incident.State(ctx)
	if len(st.Kill) != 1 || strings.Join(st.Kill[0].Server, ",") != "github,slack*" || st.Mode.Active {
		t.Fatalf("kill rules: %+v", st)
	}
	do("/ui/kill", url.Values{}, 400) // no criterion
	do("/ui/kill/"+st.Kill[0].ID+"/remove", url.Values{}, 303)
	do("/ui/kill/nope/remove", url.Values{}, 404)
	for _, kind := range []string{"principal", "token", "session"} {
		do("/ui/revocations/"+kind, url.Values{"id": {"x-" + kind}, "reason": {"r"}, "for": {"1h"}}, 303)
	}
	st, _ = e.incident.State(ctx)
	if _, ok := st.Principals["x-principal"]; !ok || len(st.Tokens) != 1 || len(st.Sessions) != 1 || st.Principals["x-principal"].Until.IsZero() {
		t.Fatalf("revocations: %+v", st)
	}
	do("/ui/revocations/principal", url.Values{"id": {"y"}, "for": {"soon"}}, 400)
	do("/ui/revocations/principal", url.Values{}, 400)
	do("/ui/revocations/bogus", url.Values{"id": {"y"}}, 400)
	do("/ui/revocations/principal/x-principal/restore", url.Values{}, 303)
	if st, _ = e.incident.State(ctx); len(st.Principals) != 0 {
		t.Fatal("restore did not lift the revocation")
	}
	// Approvals: grant one, deny another, a decided one conflicts.
	a1, _ := e.approvals.Request(ctx, identity.Principal{Sub: "bob"}, "github:create_issue#34afee88", strings.Repeat("a", 64), "")
	a2, _ := e.approvals.Request(ctx, identity.Principal{Sub: "bob"}, "github:delete_repo#00000000", strings.Repeat("b", 64), "")
	do("/ui/approvals/"+a1.ID+"/grant", url.Values{"comment": {"ok by me"}}, 303)
	do("/ui/approvals/"+a2.ID+"/deny", url.Values{}, 303)
	do("/ui/approvals/"+a1.ID+"/deny", url.Values{}, 409)
	do("/ui/approvals/nope/grant", url.Values{}, 404)
	do("/ui/approvals/"+a1.ID+"/maybe", url.Values{}, 400)
	if got, _, _ := e.approvals.Get(ctx, a1.ID); got.Status != policy.ApprovalGranted || got.DecidedBy != TokenOperator {
		t.Fatalf("granted approval: %+v", got)
	}
	if ok, _, _ := e.approvals.Check(ctx, identity.Principal{Sub: "bob"}, "github:create_issue#34afee88", strings.Repeat("a", 64)); !ok {
		t.Fatal("the requester's retry is not approved")
	}
	// Every action, refused ones included, reached OnAction with the
	// operator.
	e.mu.Lock()
	defer e.mu.Unlock()
	methods := map[string]int{}
	for _, a := range e.actions {
		if a.Operator != TokenOperator {
			t.Fatalf("action without the operator: %+v", a)
		}
		methods[a.Method]++
		if a.Method == "admin/console.approval.grant" && a.Status == 303 && a.Comment != "ok by me" {
			t.Fatalf("comment lost: %+v", a)
		}
	}
	for _, m := range []string{"admin/console.login", "admin/console.incident.enable", "admin/console.incident.disable", "admin/console.kill.add",
		"admin/console.kill.remove", "admin/console.principal.revoke", "admin/console.token.revoke", "admin/console.session.revoke",
		"admin/console.principal.restore", "admin/console.approval.grant", "admin/console.approval.deny"} {
		if methods[m] == 0 {
			t.Errorf("no action reported for %s (%v)", m, methods)
		}
	}
}

func TestConsoleLiveTail(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	e.login(t, c, adminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/ui/receipts/stream?result=deny", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); line != ": tail\n" {
		t.Fatalf("first line %q", line)
	}
	w, err := receipts.NewWriter(receipts.WriterOptions{Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	allow := receipts.New("tools/call:tool_execute", time.Now())
	allow.Decision.Result, allow.Principal.Sub = "allow", "alice"
	deny := receipts.New("tools/call:tool_execute", time.Now())
	deny.Principal.Sub, deny.Outcome.ErrorCode = "mallory", "POLICY_DENIED"
	w.Emit(allow)
	w.Emit(deny)
	_ = w.Close()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var row tailRow
		if err := json.Unmarshal([]byte(data), &row); err != nil {
			t.Fatal(err)
		}
		// The filter holds: the allowed receipt never comes.
		if row.Sub != "mallory" || row.Result != "deny" || row.Code != "POLICY_DENIED" || row.ID != deny.ReceiptID {
			t.Fatalf("tail row %+v", row)
		}
		return
	}
}

func TestConsoleOptions(t *testing.T) {
	if _, err := NewConsole(ConsoleOptions{Options: Options{Incident: &policy.Incident{}, Token: []byte(adminToken)}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("console without KV and fleet: %v", err)
	}
	files, err := staticFiles()
	if err != nil || len(files) != 2 {
		t.Fatalf("static files %v %v", files, err)
	}
}

// TestConsoleCapabilities: a capability request waiting for approval
// shows what it asks for, restricted principals' tool requests are
// listed, and capability tokens are revoked from the incident page.
func TestConsoleCapabilities(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser(t)
	csrf := e.login(t, c, adminToken)
	ctx := context.Background()
	ap, err := e.approvals.Request(ctx, identity.Principal{Sub: "dana"}, "capability:github", strings.Repeat("c", 64), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.caps.SavePending(ctx, capability.PendingRequest{ApprovalID: ap.ID, Requester: "dana", Tools: []string{"github:create_issue#34afee88"},
		Duration: 600, MaxUses: 3, Reason: "file the weekly report", JKT: "jkt-of-dana", At: time.Now()}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := e.requests.Create(ctx, capability.ToolRequest{Requester: identity.Principal{Sub: "intern"}, ToolID: "github:delete_repo#00000000",
		Call: []byte(`{}`)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, page, _ := e.get(t, c, "/ui/approvals")
	for _, want := range []string{"capability for", "github:create_issue#34afee88", "3 uses", "file the weekly report", "jkt-of-dana",
		"Tool requests of restricted principals", "intern", "github:delete_repo#00000000"} {
		if !strings.Contains(page, want) {
			t.Errorf("approvals page lacks %q", want)
		}
	}
	form := url.Values{"csrf": {csrf}, "kind": {"jti"}, "id": {"tok-1"}, "reason": {"leaked"}}
	if code, body, _ := e.post(t, c, "/ui/capabilities/revoke", form, nil); code != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", code, body)
	}
	rvs, err := e.caps.Revocations(ctx)
	if err != nil || len(rvs) != 1 || rvs[0].Subject != "tok-1" || rvs[0].By != TokenOperator || rvs[0].Reason != "leaked" {
		t.Fatalf("revocations %+v %v", rvs, err)
	}
	if _, page, _ := e.get(t, c, "/ui/incident"); !strings.Contains(page, "tok-1") {
		t.Error("the incident page does not list the revoked token")
	}
	for _, bad := range []url.Values{{"csrf": {csrf}, "kind": {"nope"}, "id": {"x"}}, {"csrf": {csrf}, "kind": {"jti"}}} {
		if code, _, _ := e.post(t, c, "/ui/capabilities/revoke", bad, nil); code != http.StatusBadRequest {
			t.Errorf("revoke %v: %d", bad, code)
		}
	}
}
