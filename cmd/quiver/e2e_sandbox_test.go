package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Secrets in quiver's own environment that no child may see (spec 001
// MUST 5).
var sandboxSecrets = map[string]string{
	"QUIVER_ADMIN_TOKEN":    "admin-token-6f1d2c-0123456789abcdef0123",
	"QUIVER_E2E_JWT_SECRET": "hs256-secret-9a8b7c",
	"DOCS_TOKEN":            "docs-bearer-3e4f5a",
	"QUIVER_TX_SECRET":      "tx-secret-0c9d8e",
}

// hostileBin is the testdata/hostile server, built on first use.
var hostileOnce struct {
	sync.Once
	bin string
	err error
}

func hostileBin(t *testing.T) string {
	t.Helper()
	hostileOnce.Do(func() {
		hostileOnce.bin = filepath.Join(filepath.Dir(quiverBin), "hostile")
		if b, err := exec.Command("go", "build", "-o", hostileOnce.bin, "../../testdata/hostile").CombinedOutput(); err != nil {
			hostileOnce.err = fmt.Errorf("go build hostile: %v\n%s", err, b)
		}
	})
	if hostileOnce.err != nil {
		t.Fatal(hostileOnce.err)
	}
	return hostileOnce.bin
}

// needSandbox skips when bubblewrap cannot run here; .ci/run installs it.
func needSandbox(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap (bubblewrap) not installed; .ci/run installs it")
	}
	if out, err := exec.Command("bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bwrap cannot create user namespaces here: %v %s", err, out)
	}
}

// sandboxEnv is quiver's environment: the test's plus the secrets and a
// variable the sandbox passes by name.
func sandboxEnv() []string {
	env := os.Environ()
	for k, v := range sandboxSecrets {
		env = append(env, k+"="+v)
	}
	return append(env, "PASSED_NAME=passed-value")
}

// serveWith starts quiver serve --config cfg over stdio with env.
func serveWith(t *testing.T, cfg string, env []string) (*mcp.ClientSession, *dSyncBuf) {
	t.Helper()
	logs := &dSyncBuf{}
	cmd := exec.Command(quiverBin, "serve", "--config", cfg)
	cmd.Env = env
	cmd.Stderr = logs
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-sandbox", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("quiver stderr:\n%s", logs)
		}
	})
	return cs, logs
}

// attempt is one entry of the hostile server's report.
type attempt struct {
	OK    bool   `json:"ok"`
	Value string `json:"value"`
	Error string `json:"error"`
}

// hostileReport is the hostile server's answer.
type hostileReport struct {
	ReadShadow     attempt           `json:"read_shadow"`
	ReadInside     attempt           `json:"read_inside"`
	ReadOutside    attempt           `json:"read_outside"`
	ReadSymlink    attempt           `json:"read_symlink"`
	WriteInside    attempt           `json:"write_inside"`
	WriteOutside   attempt           `json:"write_outside"`
	Loopback       attempt           `json:"loopback"`
	FetchAllowed   attempt           `json:"fetch_allowed"`
	FetchDenied    attempt           `json:"fetch_denied"`
	DirectAllowed  attempt           `json:"direct_allowed"`
	Env            map[string]string `json:"env"`
	Limits         string            `json:"limits"`
	HostProcessIDs int               `json:"host_process_ids"`
}

// sandboxRig is a hostile server's world: its root, a file outside it
// (and a symlink to it inside), a loopback listener and two HTTP servers.
type sandboxRig struct {
	dir, root, outside, loopback string
	allowed, denied              string // host:port
}

func newSandboxRig(t *testing.T) *sandboxRig {
	t.Helper()
	dir := t.TempDir()
	r := &sandboxRig{dir: dir, root: filepath.Join(dir, "root"), outside: filepath.Join(dir, "outside", "secret.txt")}
	for _, d := range []string{r.root, filepath.Dir(r.outside)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(r.root, "inside.txt"), []byte("inside-content"), 0o644))
	must(t, os.WriteFile(r.outside, []byte("outside-content"), 0o644))
	must(t, os.Symlink(r.outside, filepath.Join(r.root, "escape")))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	r.loopback = ln.Addr().String()
	r.allowed = testHTTP(t, "allowed-host-body")
	r.denied = testHTTP(t, "denied-host-body")
	return r
}

func testHTTP(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// config writes a direct-mode configuration with the hostile upstream
// under sandbox (a YAML flow mapping) and returns its path.
func (r *sandboxRig) config(t *testing.T, env, sandbox string) string {
	t.Helper()
	cfg := filepath.Join(r.dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`mode: direct
environment: %s
state_dir: %s
admin: {token_env: QUIVER_ADMIN_TOKEN}
firewall: {enabled: false}
upstreams:
  - name: hostile
    command: [%q]
    dir: %q
    env: {DECLARED: "yes"}
    sandbox: %s
  - name: docs
    url: http://127.0.0.1:9/mcp
    credentials: {bearer_env: DOCS_TOKEN}
    enabled: false
`, env, filepath.Join(r.dir, "state"), hostileBin(t), r.root, sandbox)), 0o644))
	return cfg
}

// attack calls the hostile tool and returns its report.
func (r *sandboxRig) attack(t *testing.T, cs *mcp.ClientSession) hostileReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hostile__attack", Arguments: map[string]any{
		"root": r.root, "outside": r.outside, "loopback": r.loopback,
		"allowed": "http://" + r.allowed + "/", "denied": "http://" + r.denied + "/",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("attack failed: %s", dText(res))
	}
	var rep hostileReport
	b, _ := json.Marshal(res.StructuredContent)
	must(t, json.Unmarshal(b, &rep))
	return rep
}

// checkNoSecrets fails if any secret of quiver's environment reached the
// child, by name or by value, or any variable beyond the minimal set.
func checkNoSecrets(t *testing.T, env map[string]string, extra ...string) {
	t.Helper()
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TZ": true, "TMPDIR": true, "DECLARED": true}
	for _, k := range extra {
		allowed[k] = true
	}
	for k, v := range env {
		if !allowed[k] {
			t.Errorf("child environment has %s", k)
		}
		for name, secret := range sandboxSecrets {
			if strings.Contains(v, secret) {
				t.Errorf("secret %s reached the child in %s", name, k)
			}
		}
	}
	if env["DECLARED"] != "yes" {
		t.Errorf("declared env missing: %v", env)
	}
}

// receiptsSandbox returns the sandbox objects of the receipts of calls to
// hostile's tools.
func receiptsSandbox(t *testing.T, stateDir string) []map[string]any {
	t.Helper()
	var out []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for len(out) == 0 && time.Now().Before(deadline) {
		files, _ := filepath.Glob(filepath.Join(stateDir, "receipts", "receipts-*.jsonl"))
		for _, f := range files {
			fh, err := os.Open(f)
			must(t, err)
			sc := bufio.NewScanner(fh)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var rc struct {
					MCP struct {
						ServerID string `json:"server_id"`
						Method   string `json:"method"`
					} `json:"mcp"`
					Sandbox map[string]any `json:"sandbox"`
				}
				if json.Unmarshal(sc.Bytes(), &rc) == nil && rc.MCP.ServerID == "hostile" && strings.HasPrefix(rc.MCP.Method, "tools/call") {
					out = append(out, rc.Sandbox)
				}
			}
			fh.Close()
		}
		if len(out) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return out
}

// TestE2ESandboxHostileServer: spec 001 tests 7 and 8 with a server that
// ignores its arguments. Sandboxed, every escape fails and the allowed
// paths and host work; with sandbox off the same attempts succeed (so
// the test can fail); no secret of quiver's environment reaches the child
// either way; receipts record the sandbox applied.
func TestE2ESandboxHostileServer(t *testing.T) {
	needSandbox(t)
	r := newSandboxRig(t)

	t.Run("sandboxed", func(t *testing.T) {
		cfg := r.config(t, "dev", fmt.Sprintf(`{fs: {write: [%q]}, net: {allow: [%q]}, env: [PASSED_NAME], limits: {memory: 512MiB, processes: 128, open_files: 256, cpu_time: 5m}}`, r.root, r.allowed))
		cs, logs := serveWith(t, cfg, sandboxEnv())
		rep := r.attack(t, cs)
		for name, a := range map[string]attempt{
			"read /etc/shadow": rep.ReadShadow, "read outside": rep.ReadOutside, "read through symlink": rep.ReadSymlink,
			"write outside": rep.WriteOutside, "loopback connect": rep.Loopback, "fetch denied host": rep.FetchDenied,
			"fetch allowed host without the proxy": rep.DirectAllowed,
		} {
			if a.OK {
				t.Errorf("%s succeeded in the sandbox: %q", name, a.Value)
			}
		}
		if !rep.ReadInside.OK || rep.ReadInside.Value != "inside-content" {
			t.Errorf("reading inside the root failed: %+v", rep.ReadInside)
		}
		if !rep.WriteInside.OK {
			t.Errorf("writing inside the root failed: %+v", rep.WriteInside)
		}
		if !rep.FetchAllowed.OK || rep.FetchAllowed.Value != "allowed-host-body" {
			t.Errorf("the allowed host was not reached through the proxy: %+v", rep.FetchAllowed)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(r.outside), "written.txt")); err == nil {
			t.Error("a file appeared outside the root")
		}
		checkNoSecrets(t, rep.Env, "PASSED_NAME", "PWD", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY", "no_proxy")
		if rep.Env["PASSED_NAME"] != "passed-value" || rep.Env["HOME"] != "/home/quiver" {
			t.Errorf("env = %v", rep.Env)
		}
		for _, lim := range []string{"Max data size             536870912", "Max processes             128", "Max open files            256", "Max cpu time              300"} {
			if !strings.Contains(rep.Limits, lim) {
				t.Errorf("limit %q not applied:\n%s", lim, rep.Limits)
			}
		}
		if rep.HostProcessIDs > 10 {
			t.Errorf("the child sees %d processes: not its own pid namespace", rep.HostProcessIDs)
		}
		if !strings.Contains(logs.String(), "egress refused") {
			t.Errorf("the proxy's refusal is not logged")
		}
		cs.Close()
		sbs := receiptsSandbox(t, filepath.Join(r.dir, "state"))
		if len(sbs) == 0 {
			t.Fatal("no receipt for the call")
		}
		checkEgressReceipts(t, filepath.Join(r.dir, "state"), r.denied)
		sb := sbs[len(sbs)-1]
		if sb["mode"] != "bwrap" || sb["fs_policy"] != "workspace_only" || sb["net_policy"] != "allowlist" ||
			!strings.Contains(fmt.Sprint(sb["detail"]), "rw:"+r.root) || !strings.Contains(fmt.Sprint(sb["detail"]), "net:proxy:1 hosts") {
			t.Errorf("receipt sandbox = %v", sb)
		}
		os.Remove(filepath.Join(r.root, "written.txt"))
		os.RemoveAll(filepath.Join(r.dir, "state"))
	})

	t.Run("off", func(t *testing.T) {
		cfg := r.config(t, "dev", `{off: "test"}`)
		cs, logs := serveWith(t, cfg, sandboxEnv())
		rep := r.attack(t, cs)
		for name, a := range map[string]attempt{
			"read outside": rep.ReadOutside, "read through symlink": rep.ReadSymlink, "write outside": rep.WriteOutside,
			"loopback connect": rep.Loopback, "fetch denied host": rep.FetchDenied, "read inside": rep.ReadInside,
		} {
			if !a.OK {
				t.Errorf("%s failed without a sandbox, so the sandboxed run proves nothing: %s", name, a.Error)
			}
		}
		if os.Geteuid() == 0 && !rep.ReadShadow.OK {
			t.Errorf("reading /etc/shadow as root failed without a sandbox: %s", rep.ReadShadow.Error)
		}
		checkNoSecrets(t, rep.Env)
		if _, ok := rep.Env["PASSED_NAME"]; ok {
			t.Error("a variable not named by the upstream reached it")
		}
		if !strings.Contains(rep.Env["HOME"], filepath.Join(r.dir, "state", "home")) {
			t.Errorf("HOME = %q, want a private directory under the state directory", rep.Env["HOME"])
		}
		if !strings.Contains(logs.String(), "sandbox off") || !strings.Contains(logs.String(), "reason=test") {
			t.Errorf("the sandbox being off is not logged")
		}
		cs.Close()
		sbs := receiptsSandbox(t, filepath.Join(r.dir, "state"))
		if len(sbs) == 0 || sbs[len(sbs)-1]["mode"] != "off" || sbs[len(sbs)-1]["detail"] != "off: test" {
			t.Errorf("receipt sandbox = %v", sbs)
		}
		os.Remove(filepath.Join(filepath.Dir(r.outside), "written.txt"))
	})
}

// TestE2ESandboxRefusals: prod refuses a command upstream without a
// sandbox block, and a sandbox that cannot be set up (no bwrap) stops
// quiver at start; both with one line naming the upstream and the fix.
func TestE2ESandboxRefusals(t *testing.T) {
	r := &sandboxRig{dir: t.TempDir()}
	r.root = r.dir
	cfg := filepath.Join(r.dir, "prod.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("environment: prod\nstate_dir: %s\nupstreams:\n  - name: hostile\n    command: [%q]\n",
		filepath.Join(r.dir, "state"), hostileBin(t))), 0o644))
	out, err := exec.Command(quiverBin, "serve", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `upstream "hostile": environment prod refuses a command upstream without a sandbox`) ||
		!strings.Contains(string(out), `sandbox: {off: "<reason>"}`) {
		t.Fatalf("prod without a sandbox: exit %v:\n%s", err, out)
	}

	// No bwrap on PATH: the sandboxed upstream cannot start.
	cfg = r.config(t, "dev", "{net: none}")
	cmd := exec.Command(quiverBin, "serve", "--config", cfg)
	cmd.Env = append(sandboxEnv(), "PATH="+t.TempDir())
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `upstream "hostile": sandbox: sandbox unavailable: bwrap (bubblewrap) not found on PATH; install it (apt-get install bubblewrap)`) {
		t.Fatalf("without bwrap: exit %v:\n%s", err, out)
	}
	if n := strings.Count(strings.TrimSpace(string(out)), "\n"); n > 0 {
		t.Errorf("want one line, got %d:\n%s", n+1, out)
	}
}

// TestE2ESandboxNPMFilesystem: the README fleet's real npm
// server-filesystem, fetched by npx through the egress proxy (allowlist:
// the npm registry) and run inside the sandbox, lists and reads a file in
// its root and cannot read outside it.
func TestE2ESandboxNPMFilesystem(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not installed: the npm server-filesystem cannot be run")
	}
	needSandbox(t)
	dir := t.TempDir()
	root, cache := filepath.Join(dir, "root"), filepath.Join(dir, "npm-cache")
	for _, d := range []string{root, cache} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello from the sandbox"), 0o644))
	outside := filepath.Join(dir, "outside.txt")
	must(t, os.WriteFile(outside, []byte("outside-content"), 0o644))
	cfg := filepath.Join(dir, "quiver.yaml")
	// npx may take long to fetch the server: requests wait for it (the
	// first catalog) up to listen.ready_timeout.
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`mode: direct
environment: dev
state_dir: %s
listen: {ready_timeout: 180s}
firewall: {enabled: false}
upstreams:
  - name: files
    command: [npx, -y, "@modelcontextprotocol/server-filesystem@2026.8.31", .]
    dir: %q
    env: {npm_config_cache: %q, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false"}
    connect_timeout: 180s
    sandbox:
      fs: {write: [%q, %q]}
      net: {allow: [registry.npmjs.org]}
`, filepath.Join(dir, "state"), root, cache, root, cache)), 0o644))
	cs, _ := serveWith(t, cfg, sandboxEnv())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(tool string, args map[string]any) (string, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return err.Error(), false
		}
		return dText(res), !res.IsError
	}
	if out, ok := call("files__list_directory", map[string]any{"path": root}); !ok || !strings.Contains(out, "hello.txt") {
		t.Fatalf("list_directory: %v %s", ok, out)
	}
	if out, ok := call("files__read_text_file", map[string]any{"path": filepath.Join(root, "hello.txt")}); !ok || !strings.Contains(out, "hello from the sandbox") {
		t.Fatalf("read_text_file: %v %s", ok, out)
	}
	if out, ok := call("files__read_text_file", map[string]any{"path": outside}); ok || strings.Contains(out, "outside-content") {
		t.Fatalf("read outside the root: %v %s", ok, out)
	}
}

// checkEgressReceipts asserts that the egress proxy's refusal of denied
// (host:port) has a deny receipt (EGRESS_BLOCKED, the destination hashed)
// and that no receipt names it in clear.
func checkEgressReceipts(t *testing.T, stateDir, denied string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(stateDir, "receipts", "receipts-*.jsonl"))
	found := false
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		if strings.Contains(string(data), denied) {
			t.Errorf("a receipt names the refused destination %s in clear", denied)
		}
		for _, line := range strings.Split(string(data), "\n") {
			var rc struct {
				MCP struct {
					Method   string `json:"method"`
					ServerID string `json:"server_id"`
				} `json:"mcp"`
				Decision struct {
					Result      string   `json:"result"`
					ReasonCodes []string `json:"reason_codes"`
				} `json:"decision"`
				Sandbox map[string]any `json:"sandbox"`
			}
			if json.Unmarshal([]byte(line), &rc) != nil || rc.MCP.Method != "egress" {
				continue
			}
			codes := strings.Join(rc.Decision.ReasonCodes, ",")
			if rc.MCP.ServerID == "hostile" && rc.Decision.Result == "deny" && strings.Contains(codes, "EGRESS_BLOCKED") &&
				strings.Contains(codes, "EGRESS_HOST_SHA256:") && rc.Sandbox["mode"] == "bwrap" {
				found = true
			}
		}
	}
	if !found {
		t.Error("no deny receipt for the egress proxy's refusal")
	}
}
