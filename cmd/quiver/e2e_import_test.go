package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/guard"
)

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stdioSessionLog is stdioSession with the child's stderr kept.
func stdioSessionLog(t *testing.T, env []string, args ...string) (*mcp.ClientSession, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(quiverBin, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Log(stderr.String())
		}
	})
	return cs, stderr
}

// runBin runs the quiver binary to completion.
func runBin(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(quiverBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// claudeDesktopFile writes a Claude Desktop mcpServers file whose server
// is the go-sdk test upstream (with a literal secret in its env, and a
// disabled server that does not exist), and returns its path and the
// upstream's record file.
func claudeDesktopFile(t *testing.T, dir string, extra ...string) (path, record string) {
	t.Helper()
	record = filepath.Join(dir, "calls.jsonl")
	doc := map[string]any{"mcpServers": map[string]any{
		"alpha": map[string]any{"command": upstreamBin, "args": append([]string{"-name", "alpha", "-record", record}, extra...),
			"env": map[string]any{"ALPHA_API_TOKEN": "literal-secret-value"}},
		"retired": map[string]any{"command": "no-such-mcp-server", "disabled": true},
	}}
	b, _ := json.MarshalIndent(doc, "", "  ")
	path = filepath.Join(dir, "claude_desktop_config.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, record
}

// importedAdd is the tool_id of the imported alpha server's add tool.
const importedAdd = "alpha:add#39f8edd4"

// TestE2EServeImportedClientFile serves a Claude Desktop file as it is:
// in environment dev (said on stderr), the literal secret moved to
// quiver's environment, a tool called through the real upstream.
func TestE2EServeImportedClientFile(t *testing.T) {
	dir := t.TempDir()
	file, record := claudeDesktopFile(t, dir)
	cs, stderr := stdioSessionLog(t, []string{"ALPHA_API_TOKEN=from-quivers-env"}, "--config", file)
	ids := toolIDs(t, cs, "alpha")
	if ids["alpha/add"] != importedAdd {
		t.Fatalf("alpha's add is %q, want %q (the prod test names it)", ids["alpha/add"], importedAdd)
	}
	res, m := execute(t, cs, ids["alpha/echo"], map[string]any{"text": "imported"})
	if res.IsError {
		t.Fatalf("echo: %v", m)
	}
	calls, _ := os.ReadFile(record)
	if !strings.Contains(string(calls), `"tool":"echo"`) {
		t.Fatalf("the upstream saw no echo call: %s", calls)
	}
	log := stderr.String()
	for _, want := range []string{
		"is an MCP client's file (mcpServers: Claude Desktop, 2 servers, 1 disabled), served in environment dev",
		"mcpServers.alpha.env.ALPHA_API_TOKEN: the literal value is not copied",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "literal-secret-value") {
		t.Error("the literal secret reached the log")
	}
}

// TestE2EServeImportedClientFileProd: --env prod serves the same file
// with no registry: no tool is classified, so none is shown and none can
// be called (prod hides what every call to would be refused), and the user
// is told why.
func TestE2EServeImportedClientFileProd(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	file, record := claudeDesktopFile(t, dir)
	cs, stderr := stdioSessionLog(t, []string{"ALPHA_API_TOKEN=x"}, "--config", file, "--env", "prod")
	if _, m := callTool(t, cs, "tool_browse", map[string]any{"path": "/alpha"}); m["error"] != "PATH_NOT_FOUND" {
		t.Fatalf("browse /alpha in prod without a registry: %v", m)
	}
	res, m := execute(t, cs, importedAdd, map[string]any{"a": 1, "b": 2})
	if !res.IsError || m["error"] != "HYDRATE_FAILED" {
		t.Fatalf("got %v", m)
	}
	if calls, _ := os.ReadFile(record); len(calls) != 0 {
		t.Fatalf("a denied call reached the upstream: %s", calls)
	}
	if !strings.Contains(stderr.String(), "served in environment prod") || !strings.Contains(stderr.String(), "quiver registry init") {
		t.Errorf("stderr: %s", stderr)
	}
}

// TestE2EServeClientFileErrors: a malformed client file, an unknown one,
// and --env with quiver's own file exit 2 with one line naming the file
// and the key.
func TestE2EServeClientFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.json", `{"mcpServers": {"x": {"command": "npx", "args": "-y"}}}`)
	yaml := write("quiver.yaml", "environment: dev\nupstreams: []\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", bad}, bad + ": mcpServers.x.args: must be an array of strings"},
		{[]string{"serve", "--config", yaml, "--env", "prod"}, "--env applies to an MCP client's file"},
		{[]string{"serve", "--config", bad, "--env", "staging"}, "--env must be dev or prod"},
		{[]string{"config", "import", yaml}, yaml + ": not valid JSON"},
	} {
		code, _, errs := runBin(t, dir, nil, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestE2EProdQuickstart is the README's prod quickstart through the real
// binary: import a Claude Desktop file, draft the registry from the
// fleet, serve in prod (sandboxed), call a read tool and a write tool;
// then the upstream changes and registry diff reports it.
func TestE2EProdQuickstart(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	file, record := claudeDesktopFile(t, dir)
	env := []string{"ALPHA_API_TOKEN=x"}

	code, _, errs := runBin(t, dir, env, "config", "import", file, "--out", "quiver.yaml")
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	yaml, _ := os.ReadFile(filepath.Join(dir, "quiver.yaml"))
	for _, want := range []string{"environment: prod", "sandbox:", "write: [" + record + "]", "read: [" + upstreamBin + ", " + dir + "]", "net: none", "registry: [registry/*.yaml]", `ALPHA_API_TOKEN: "${ALPHA_API_TOKEN}"`} {
		if !strings.Contains(string(yaml), want) {
			t.Errorf("quiver.yaml lacks %q:\n%s", want, yaml)
		}
	}
	if code, _, _ := runBin(t, dir, env, "config", "import", file, "--out", "quiver.yaml"); code != 2 {
		t.Errorf("import over an existing file: exit %d", code)
	}
	// Run from elsewhere, init writes beside the configuration, where its
	// registry glob looks.
	code, out, errs := runBin(t, t.TempDir(), env, "registry", "init", "--config", filepath.Join(dir, "quiver.yaml"))
	if code != 0 {
		t.Fatalf("registry init: exit %d: %s%s", code, out, errs)
	}
	if !strings.Contains(out, filepath.Join(dir, "registry", "alpha.yaml")+": 14 tools (5 read, 9 write)") || !strings.Contains(out, "registry: [registry/*.yaml]") {
		t.Errorf("registry init: %s", out)
	}
	reg, err := guard.LoadRegistry([]string{filepath.Join(dir, "registry", "*.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]guard.Class{"add": guard.ClassRead, "big_log": guard.ClassRead, "echo": guard.ClassWrite, "crash": guard.ClassWrite} {
		if got := reg.ClassOf("alpha", tool); got != want {
			t.Errorf("alpha:%s classified %s, want %s", tool, got, want)
		}
	}
	if code, _, _ := runBin(t, dir, env, "registry", "init", "--config", "quiver.yaml"); code != 2 {
		t.Errorf("registry init over reviewed manifests: exit %d", code)
	}
	code, out, errs = runBin(t, dir, env, "registry", "diff", "--config", "quiver.yaml")
	if code != 0 || out != "" {
		t.Fatalf("registry diff of an unchanged fleet: exit %d: %s%s", code, out, errs)
	}

	cs, _ := stdioSessionLog(t, env, "--config", filepath.Join(dir, "quiver.yaml"))
	ids := toolIDs(t, cs, "alpha")
	if res, m := execute(t, cs, ids["alpha/add"], map[string]any{"a": 2, "b": 3}); res.IsError {
		t.Fatalf("read tool in prod: %v", m)
	}
	res, m := callTool(t, cs, "tool_execute", map[string]any{"tool_id": ids["alpha/echo"], "args": map[string]any{"text": "hi"}, "idempotency_key": "qs-1"})
	if res.IsError {
		t.Fatalf("write tool in prod: %v", m)
	}
	cs.Close()

	// The server is upgraded: its tools drift.
	drifted := strings.Replace(string(yaml), "-record, "+record+"]", "-record, "+record+", -drift]", 1)
	if drifted == string(yaml) {
		t.Fatalf("cannot place -drift in:\n%s", yaml)
	}
	if err := os.WriteFile(filepath.Join(dir, "quiver.yaml"), []byte(drifted), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runBin(t, dir, env, "registry", "diff", "--config", "quiver.yaml")
	want := "~ alpha:echo input schema changed (sha256:"
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "- alpha:fail vanished\n") ||
		!strings.Contains(out, "+ alpha:wipe appeared (unclassified until a manifest lists it)\n") || strings.Count(out, "\n") != 3 {
		t.Fatalf("registry diff after drift: exit %d:\n%s%s", code, out, errs)
	}
	if code, _, errs := runBin(t, dir, env, "registry", "diff", "--config", "quiver.yaml", "--dir", "nowhere"); code != 2 || !strings.Contains(errs, "run quiver registry init first") {
		t.Errorf("diff without a lock: exit %d %s", code, errs)
	}
}

// TestE2EConfigCheckConnect: config check resolves commands on PATH (after
// ~ and ${HOME}) and, with --connect, reports each upstream with the
// protocol it negotiated.
func TestE2EConfigCheckConnect(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(upstreamBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "bin", "upstream"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`environment: dev
state_dir: %s
upstreams:
  - name: tilde
    command: [~/bin/upstream, -name, tilde]
  - name: home
    command: ["${HOME}/bin/upstream", -name, home, -max-protocol, 2025-11-25]
  - name: down
    url: http://127.0.0.1:1/mcp
    connect_timeout: 1s
`, filepath.Join(dir, "state"))
	path := filepath.Join(dir, "quiver.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home}
	code, _, errs := runBin(t, dir, env, "config", "check", "--config", path)
	if code != 0 {
		t.Fatalf("check: exit %d: %s", code, errs)
	}
	code, _, errs = runBin(t, dir, env, "config", "check", "--config", path, "--connect")
	for _, want := range []string{
		"quiver: upstream tilde (command): ok, protocol 2026-07-28, server tilde 1.0.0, 14 tools",
		"quiver: upstream home (command): ok, protocol 2025-11-25, server home 1.0.0, 14 tools",
		"quiver: upstream down (url): FAILED: ",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if code != 1 {
		t.Errorf("--connect with a dead upstream: exit %d", code)
	}
	// A program that is not there fails the check without --connect.
	missing := strings.Replace(cfg, "~/bin/upstream", "~/bin/absent", 1)
	if err := os.WriteFile(path, []byte(missing), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runBin(t, dir, env, "config", "check", "--config", path)
	if code != 2 || !strings.Contains(errs, "upstreams[0].command[0]: \""+filepath.Join(home, "bin", "absent")+"\" is not an executable file") {
		t.Errorf("missing program: exit %d: %s", code, errs)
	}
}
