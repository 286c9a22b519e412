package main

// Spec 001 conformance tests 7 and 8, the parts that apply without a
// sandbox: quiver's per-upstream argument guards refuse a call whose
// arguments name a path outside the upstream's workspace, or a network
// destination outside its egress allowlist, before dispatch, and the deny
// receipt carries the reason (for egress, the blocked host and never the
// rest of the URL). A recording upstream shows that refused calls never
// reach it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/quiver-mcp/quiver/runtime/egress"
)

// guardedUpstream is the YAML of one more recording upstream (the test
// upstream binary) with a guard block, and its record file.
func guardedUpstream(t *testing.T, name, guard string, flags ...string) (yaml, record string) {
	t.Helper()
	record = filepath.Join(t.TempDir(), name+".jsonl")
	extra := ""
	for _, f := range flags {
		extra += fmt.Sprintf(", %q", f)
	}
	return fmt.Sprintf("  - name: %s\n    command: [%q, \"-name\", %q, \"-record\", %q%s]\n    %s\n", name, upstreamBin, name, record, extra, guard), record
}

// recorded returns the text arguments of the echo calls that reached the
// upstream.
func recorded(t *testing.T, record string) []string {
	t.Helper()
	data, err := os.ReadFile(record)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, line := range bytes.Split(data, []byte("\n")) {
		var ev struct {
			Event, Tool string
			Args        struct{ Text string }
		}
		if json.Unmarshal(line, &ev) == nil && ev.Event == "call" && ev.Tool == "echo" {
			out = append(out, ev.Args.Text)
		}
	}
	return out
}

// denyReceipts returns the deny receipts of toolID with error code code.
func (e *safetyEnv) denyReceipts(t *testing.T, toolID, code string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range e.readReceipts(t) {
		if executed(r, toolID) && field(r, "decision.result") == "deny" && field(r, "outcome.error_code") == code {
			out = append(out, r)
		}
	}
	return out
}

// Test 7 (without a sandbox): reads and writes naming a path outside the
// workspace are refused with PATH_OUTSIDE_WORKSPACE before dispatch;
// paths inside it go through.
func TestSafety7_WorkspaceBoundary(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	must(t, os.MkdirAll(ws, 0o755))
	up, record := guardedUpstream(t, "files", fmt.Sprintf("workspace: {roots: [%q], path_args: [TEXT]}", ws))
	e := startSafety(t, up)
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	echo := listedID(t, alice, listNames(t, alice), "files", "echo")
	if echo == "" {
		t.Fatal("files:echo is not listed")
	}
	allowed := []string{"notes/today.md", filepath.Join(ws, "out", "report.csv"), "file://" + filepath.Join(ws, "a.txt"), "./x/../y"}
	refused := []string{"../outside.txt", "/etc/passwd", filepath.Join(ws, "..", "ws2", "x"), "file:///etc/shadow", "~/.ssh/id_rsa", "notes/../../escape"}
	for _, p := range allowed {
		if res, m := execute(t, alice, echo, map[string]any{"text": p}); res.IsError {
			t.Fatalf("%q refused: %v", p, m)
		}
	}
	for _, p := range refused {
		res, m := execute(t, alice, echo, map[string]any{"text": p})
		if !res.IsError || errCode(m) != "PATH_OUTSIDE_WORKSPACE" {
			t.Fatalf("%q: %v", p, m)
		}
		if msg, _ := m["message"].(string); !strings.Contains(msg, `"text"`) || strings.Contains(msg, p) {
			t.Fatalf("message %q should name the key, not the value", msg)
		}
	}
	// A dry run reports the check by name.
	_, dr := callTool(t, alice, "tool_execute", map[string]any{"tool_id": echo, "args": map[string]any{"text": "/etc/passwd"}, "dry_run": true})
	found := false
	for _, c := range dr["checks"].([]any) {
		c := c.(map[string]any)
		if c["name"] == "workspace" {
			found = c["status"] == "fail" && strings.HasPrefix(c["detail"].(string), "PATH_OUTSIDE_WORKSPACE")
		}
	}
	if !found || dr["allowed"] != false {
		t.Fatalf("dry run: %v", dr)
	}

	got := recorded(t, record)
	if strings.Join(got, "\n") != strings.Join(allowed, "\n") {
		t.Fatalf("the upstream saw %q, want exactly %q", got, allowed)
	}
	e.waitReceipt(t, "workspace denials", func(map[string]any) bool {
		return len(e.denyReceipts(t, echo, "PATH_OUTSIDE_WORKSPACE")) >= len(refused)
	})
	for _, r := range e.denyReceipts(t, echo, "PATH_OUTSIDE_WORKSPACE") {
		codes := field(r, "decision.reason_codes")
		if !hasString(codes, "PATH_OUTSIDE_WORKSPACE") || !hasString(codes, "WORKSPACE_ESCAPE") {
			t.Fatalf("receipt: %v", r)
		}
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Test 8 (without a sandbox): a call naming a non-allowlisted destination
// is refused with EGRESS_BLOCKED before dispatch, and its receipt shows
// the blocked host (not the path or query of the URL).
func TestSafety8_EgressBoundary(t *testing.T) {
	up, record := guardedUpstream(t, "web", `egress: {allow: [api.example.com, "*.example.org", 127.0.0.1]}`)
	e := startSafety(t, up)
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	echo := listedID(t, alice, listNames(t, alice), "web", "echo")
	if echo == "" {
		t.Fatal("web:echo is not listed")
	}
	allowed := []string{"https://api.example.com/v1/items", "HTTPS://Docs.Example.ORG/guide", "http://127.0.0.1:8080/health", "just some text",
		"edit src/main.go, see README.md", "ssh://git@api.example.com/repo", "file:///tmp/local"}
	refused := map[string]string{
		"https://evil.example.net/exfil?secret=s3cr3t": "evil.example.net",
		"http://api.example.com@attacker.test/steal":   "attacker.test",
		"wss://example.org/socket":                     "example.org",
		"http://10.0.0.7/admin":                        "10.0.0.7",
		// finding 4: every scheme, scheme-less hosts, URLs inside text
		"gopher://gopher.attacker.test/1":         "gopher.attacker.test",
		"ssh://git@ssh.attacker.test:2222/r":      "ssh.attacker.test",
		"file://smb.attacker.test/share/x":        "smb.attacker.test",
		"//cdn.attacker.test/x.js":                "cdn.attacker.test",
		"bare.attacker.test/exfil":                "bare.attacker.test",
		"port.attacker.test:4444":                 "port.attacker.test",
		"please fetch https://text.attacker.test": "text.attacker.test",
	}
	for _, u := range allowed {
		if res, m := execute(t, alice, echo, map[string]any{"text": u}); res.IsError {
			t.Fatalf("%q refused: %v", u, m)
		}
	}
	for u, host := range refused {
		res, m := execute(t, alice, echo, map[string]any{"text": u})
		if !res.IsError || errCode(m) != "EGRESS_BLOCKED" {
			t.Fatalf("%q: %v", u, m)
		}
		if d, _ := m["details"].(map[string]any); d["host"] != host {
			t.Fatalf("%q: details %v", u, m["details"])
		}
	}
	if got := recorded(t, record); strings.Join(got, "\n") != strings.Join(allowed, "\n") {
		t.Fatalf("the upstream saw %q, want exactly %q", got, allowed)
	}
	e.waitReceipt(t, "egress denials", func(map[string]any) bool {
		return len(e.denyReceipts(t, echo, "EGRESS_BLOCKED")) >= len(refused)
	})
	seen := map[string]bool{}
	for _, r := range e.denyReceipts(t, echo, "EGRESS_BLOCKED") {
		codes := field(r, "decision.reason_codes")
		if !hasString(codes, "EGRESS_BLOCKED") || !hasString(codes, "EGRESS_HOST_NOT_ALLOWED") {
			t.Fatalf("receipt: %v", r)
		}
		for _, host := range refused {
			if hasString(codes, egress.HostReason(host)) {
				seen[host] = true
			}
		}
		b, _ := json.Marshal(r)
		for _, host := range refused {
			if bytes.Contains(b, []byte(host)) {
				t.Fatalf("the receipt carries the host %s in clear: %s", host, b)
			}
		}
		if bytes.Contains(b, []byte("s3cr3t")) || bytes.Contains(b, []byte("/exfil")) || bytes.Contains(b, []byte("/steal")) {
			t.Fatalf("the receipt carries more of the URL than its host: %s", b)
		}
	}
	if len(seen) != len(refused) {
		t.Fatalf("receipts name the digests of the blocked hosts %v, want all of %v", seen, refused)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Finding 5: credentials in every common shape are refused before
// dispatch (CLIENT_CREDENTIAL_REJECTED, the kind in the receipt), the
// caller's own bearer token inside free text included; near misses pass.
// The recording upstream sees only the allowed calls.
func TestSafety5_CredentialShapes(t *testing.T) {
	up, record := guardedUpstream(t, "notes", "risk: LOW")
	e := startSafety(t, up)
	token := hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}})
	alice := e.as(t, token)
	echo := listedID(t, alice, listNames(t, alice), "notes", "echo")
	if echo == "" {
		t.Fatal("notes:echo is not listed")
	}
	aws := "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	refused := []struct {
		args map[string]any
		kind string
	}{
		{map[string]any{"text": "x", "cookie": "session=0123456789abcdef"}, "COOKIE"},
		{map[string]any{"text": "x", "set-cookie": "sid=0123456789abcdef; HttpOnly"}, "COOKIE"},
		{map[string]any{"text": "x", "aws_secret_access_key": aws}, "KEYED"},
		{map[string]any{"text": "creds: AKIA" + "IOSFODNN7EXAMPLE"}, "AWS_KEY"},
		{map[string]any{"text": "-----BEGIN " + "PRIVATE KEY-----\nMIIEvQ...\n-----END PRIVATE KEY-----"}, "PEM_PRIVATE_KEY"},
		{map[string]any{"text": "my token is " + token + " thanks"}, "JWT"},
		{map[string]any{"text": "curl -H 'Authorization: Bearer 0123456789abcdefXYZ'"}, "AUTH_HEADER"},
		{map[string]any{"text": "gh" + "p_" + strings.Repeat("a1B2", 9)}, "PROVIDER_TOKEN"},
	}
	allowed := []string{"plain text", "-----BEGIN PUBLIC KEY-----", "the bearer of bad news", "cookie policy: none"}
	for _, tc := range refused {
		res, m := execute(t, alice, echo, tc.args)
		if !res.IsError || errCode(m) != "CLIENT_CREDENTIAL_REJECTED" {
			t.Fatalf("%s: %v", tc.kind, m)
		}
		if d, _ := m["details"].(map[string]any); d["kind"] != tc.kind {
			t.Fatalf("%s: details %v", tc.kind, m["details"])
		}
	}
	for _, s := range allowed {
		if res, m := execute(t, alice, echo, map[string]any{"text": s}); res.IsError {
			t.Fatalf("%q refused: %v", s, m)
		}
	}
	if got := recorded(t, record); strings.Join(got, "\n") != strings.Join(allowed, "\n") {
		t.Fatalf("the upstream saw %q, want exactly %q", got, allowed)
	}
	if data, _ := os.ReadFile(record); bytes.Contains(data, []byte(token)) || bytes.Contains(data, []byte(aws)) {
		t.Fatal("a credential reached the upstream")
	}
	e.waitReceipt(t, "credential denials", func(map[string]any) bool {
		return len(e.denyReceipts(t, echo, "CLIENT_CREDENTIAL_REJECTED")) >= len(refused)
	})
	for _, r := range e.denyReceipts(t, echo, "CLIENT_CREDENTIAL_REJECTED") {
		if !hasString(field(r, "decision.reason_codes"), "CLIENT_TOKEN_IN_ARGS") || field(r, "token_handling.mode") != "blocked" {
			t.Fatalf("receipt: %v", r)
		}
		if b, _ := json.Marshal(r); bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(aws)) {
			t.Fatalf("the receipt carries the credential: %s", b)
		}
	}
	if logs := e.srv.log(); strings.Contains(logs, token) || strings.Contains(logs, aws) {
		t.Fatal("the log carries the credential")
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Finding 10 (spec 001 test 6): with strict_args, an argument name the
// tool's schema does not declare is refused with ARGS_INVALID before
// dispatch, the unknown names in the details; without it (the dev
// default) the call goes through.
func TestSafety6_StrictArgs(t *testing.T) {
	strict, record := guardedUpstream(t, "strict", "strict_args: true", "-open-echo")
	loose, looseRecord := guardedUpstream(t, "loose", "risk: LOW", "-open-echo")
	e := startSafety(t, strict+loose)
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	names := listNames(t, alice)
	echo, looseEcho := listedID(t, alice, names, "strict", "echo"), listedID(t, alice, names, "loose", "echo")
	if res, m := execute(t, alice, echo, map[string]any{"text": "declared"}); res.IsError {
		t.Fatalf("declared args refused: %v", m)
	}
	res, m := execute(t, alice, echo, map[string]any{"text": "smuggled", "command": "rm -rf /", "Text": "x"})
	if !res.IsError || errCode(m) != "ARGS_INVALID" {
		t.Fatalf("unknown args: %v", m)
	}
	d, _ := m["details"].(map[string]any)
	if u, _ := d["unknown_args"].([]any); len(u) != 2 || u[0] != "/Text" || u[1] != "/command" {
		t.Fatalf("details %v", d)
	}
	if got := recorded(t, record); strings.Join(got, ",") != "declared" {
		t.Fatalf("the strict upstream saw %q", got)
	}
	if res, m := execute(t, alice, looseEcho, map[string]any{"text": "passes", "extra": 1}); res.IsError {
		t.Fatalf("strict_args off (dev): %v", m)
	}
	if got := recorded(t, looseRecord); strings.Join(got, ",") != "passes" {
		t.Fatalf("the loose upstream saw %q", got)
	}
	r := e.waitReceipt(t, "strict_args denial", func(r map[string]any) bool {
		return executed(r, echo) && field(r, "decision.result") == "deny"
	})
	if !hasString(field(r, "decision.reason_codes"), "UNKNOWN_ARGS") {
		t.Fatalf("receipt: %v", r)
	}
	e.srv.stop(t, syscall.SIGTERM)
}

// Finding 12a: a plain http:// upstream off loopback is refused at start
// and by config check (one line, exit 2) unless --insecure or insecure:
// true; config check also refuses a prod command upstream without a
// sandbox, which serve refuses.
func TestE2EInsecureUpstreams(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	state := "state_dir: " + filepath.Join(dir, "state") + "\n"
	plain := write("plain.yaml", state+"environment: dev\nupstreams:\n  - name: remote\n    url: http://upstream.invalid/mcp\n")
	sse := write("sse.yaml", state+"environment: dev\nupstreams:\n  - name: old\n    sse: http://10.0.0.9:9001/sse\n")
	allowed := write("allowed.yaml", state+"environment: dev\ninsecure: true\nupstreams:\n  - name: remote\n    url: http://upstream.invalid/mcp\n")
	loop := write("loop.yaml", state+"environment: dev\nupstreams:\n  - name: local\n    url: http://127.0.0.1:9/mcp\n  - name: tls\n    url: https://upstream.invalid/mcp\n")
	bare := write("bare.yaml", state+"environment: prod\nupstreams:\n  - name: files\n    command: [/bin/true]\n")
	refused := func(want string, args ...string) {
		t.Helper()
		out, err := exec.Command(quiverBin, args...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), want) {
			t.Errorf("%v: exit %v, output %q", args, err, out)
		}
	}
	refused("upstreams[0].url: plain http:// upstream off loopback (remote)", "serve", "--config", plain)
	refused("upstreams[0].url: plain http:// upstream off loopback (remote)", "config", "check", "--config", plain)
	refused("upstreams[0].sse: plain http:// upstream off loopback (old)", "config", "check", "--config", sse)
	refused("upstreams[0]: command upstream without a sandbox in environment prod (files)", "config", "check", "--config", bare)
	for _, p := range []string{allowed, loop} {
		if out, err := exec.Command(quiverBin, "config", "check", "--config", p).CombinedOutput(); err != nil {
			t.Errorf("config check %s: %v\n%s", p, err, out)
		}
	}
	// --insecure gets serve past the check, to the next one: an unset
	// environment reference of another upstream (so the test need not
	// wait for an unreachable upstream).
	unset := write("unset.yaml", state+"environment: dev\nupstreams:\n  - name: remote\n    url: http://upstream.invalid/mcp\n"+
		"  - name: local\n    command: [/bin/true]\n    env: {X: \"${QUIVER_E2E_NEVER_SET}\"}\n")
	refused("plain http:// upstream off loopback", "serve", "--config", unset)
	refused("QUIVER_E2E_NEVER_SET is not set", "serve", "--insecure", "--config", unset)
}

// Finding 12b: incident mode's egress block refuses calls to tools that
// reach the network and calls whose arguments name a host, before
// dispatch; and a principal denied past the threshold is quarantined
// (receipted, visible in the admin API) until an operator releases it.
func TestSafety10_IncidentEgressBlockAndQuarantine(t *testing.T) {
	web, webRecord := guardedUpstream(t, "web", "egress: {allow: [api.example.com]}")
	notes, notesRecord := guardedUpstream(t, "notes", "risk: LOW")
	e := startSafety(t, web+notes+"incident: {quarantine: {denials: 4, window: 10m}}\n")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	names := listNames(t, alice)
	webEcho, notesEcho := listedID(t, alice, names, "web", "echo"), listedID(t, alice, names, "notes", "echo")

	e.adminCall(t, http.MethodPost, "/admin/v1/incident", map[string]any{"reason": "e2e exfil", "deny_min_risk": "CRITICAL", "egress_block": true})
	blocked := func(id, text string) {
		t.Helper()
		res, m := execute(t, alice, id, map[string]any{"text": text})
		if !res.IsError || !strings.Contains(fmt.Sprint(m), "INCIDENT_EGRESS_BLOCK") {
			t.Fatalf("%s %q: %v", id, text, m)
		}
	}
	if res, m := execute(t, alice, notesEcho, map[string]any{"text": "local only"}); res.IsError {
		t.Fatalf("a call without egress is refused: %v", m)
	}
	blocked(notesEcho, "fetch https://api.example.com/x")
	blocked(notesEcho, "push to git@github.example:org/repo")
	blocked(webEcho, "no host at all") // the upstream itself reaches the network
	e.adminCall(t, http.MethodDelete, "/admin/v1/incident", nil)
	if res, m := execute(t, alice, webEcho, map[string]any{"text": "after the incident"}); res.IsError {
		t.Fatalf("after disable: %v", m)
	}
	if got := recorded(t, notesRecord); strings.Join(got, "|") != "local only" {
		t.Fatalf("notes saw %q", got)
	}
	if got := recorded(t, webRecord); strings.Join(got, "|") != "after the incident" {
		t.Fatalf("web saw %q", got)
	}

	// Auto-quarantine: eve's 4th denial quarantines her.
	eve := e.as(t, hsToken(t, "eve", jwt.MapClaims{"groups": []string{"sre"}}))
	for i := range 4 {
		res, m := execute(t, eve, notesEcho, map[string]any{"text": "x", "access_token": fmt.Sprintf("stolen-token-%016d", i)})
		if !res.IsError || errCode(m) != "CLIENT_CREDENTIAL_REJECTED" {
			t.Fatalf("denial %d: %v", i, m)
		}
	}
	res, m := execute(t, eve, notesEcho, map[string]any{"text": "innocent"})
	if !res.IsError || !strings.Contains(fmt.Sprint(m), "PRINCIPAL_QUARANTINED") {
		t.Fatalf("eve after 4 denials: %v", m)
	}
	if res, m := execute(t, alice, notesEcho, map[string]any{"text": "alice still works"}); res.IsError {
		t.Fatalf("alice: %v", m)
	}
	st := e.adminCall(t, http.MethodGet, "/admin/v1/incident", nil)
	if q, _ := st["quarantined_principals"].(map[string]any); q["jwt:ci:eve"] == nil {
		t.Fatalf("admin state: %v", st)
	}
	e.waitReceipt(t, "quarantine receipt", func(r map[string]any) bool {
		return field(r, "mcp.method") == "quarantine" && field(r, "principal.sub") == "eve" &&
			hasString(field(r, "decision.reason_codes"), "AUTO_QUARANTINE")
	})
	e.adminCall(t, http.MethodDelete, "/admin/v1/quarantine/jwt:ci:eve", nil)
	if res, m := execute(t, eve, notesEcho, map[string]any{"text": "released"}); res.IsError {
		t.Fatalf("eve after release: %v", m)
	}
	if got := recorded(t, notesRecord); strings.Join(got, "|") != "local only|alice still works|released" {
		t.Fatalf("notes saw %q", got)
	}
	e.srv.stop(t, syscall.SIGTERM)
}
