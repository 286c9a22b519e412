package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/sandbox"
)

// Binaries built once for the end-to-end tests: quiver itself and the
// go-sdk test upstream of testdata/upstream.
var quiverBin, upstreamBin string

func TestMain(m *testing.M) {
	// In-process runs of `quiver bench` use this binary as the sandbox
	// helper, as main does.
	sandbox.RunHelper(os.Args)
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "quiver-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// No test touches the user's state directory: a quiver started
	// without state_dir (or a test that reads the default) places it
	// under this temporary XDG_STATE_HOME, and every child inherits it.
	if err := os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "xdg-state")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	quiverBin = filepath.Join(dir, "quiver")
	upstreamBin = filepath.Join(dir, "upstream")
	for out, pkg := range map[string]string{quiverBin: ".", upstreamBin: "../../testdata/upstream"} {
		args := []string{"build", "-o", out}
		if raceEnabled && out == quiverBin {
			args = append(args, "-race")
		}
		if b, err := exec.Command("go", append(args, pkg)...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, b)
			return 1
		}
	}
	return m.Run()
}

// fleetConfig writes a config with a live go-sdk upstream (recording its
// calls) and a static catalog, and returns its path and the record file.
func fleetConfig(t *testing.T, mode string) (cfgPath, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "calls.jsonl")
	fleet, err := filepath.Abs("../../runtime/testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`mode: %s
environment: dev
state_dir: %s
log: {level: debug}
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-record", %q]
    connect_timeout: 10s
    call_timeout: 5s
  - name: fleet
    catalog: %q
`, mode, filepath.Join(dir, "state"), upstreamBin, record, fleet)
	cfgPath = filepath.Join(dir, "quiver.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, record
}

// stdioSession starts `quiver serve` as a child speaking MCP on stdio.
func stdioSession(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(quiverBin, append([]string{"serve"}, args...)...)
	cmd.Stderr = testWriter{t}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type httpServer struct {
	cmd    *exec.Cmd
	url    string // the MCP endpoint
	base   string
	done   chan error
	stderr *strings.Builder
	mu     *sync.Mutex
}

// startHTTP starts `quiver serve --http 127.0.0.1:0` and waits for its
// listening line.
func startHTTP(t *testing.T, args ...string) *httpServer {
	t.Helper()
	cmd := exec.Command(quiverBin, append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &httpServer{cmd: cmd, done: make(chan error, 1), stderr: &strings.Builder{}, mu: &sync.Mutex{}}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if u, ok := strings.CutPrefix(line, "quiver: listening on "); ok {
				urlc <- u
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case s.url = <-urlc:
	case err := <-s.done:
		t.Fatalf("quiver exited before listening: %v\n%s", err, s.log())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("quiver did not listen\n%s", s.log())
	}
	s.base = strings.TrimSuffix(s.url, "/mcp")
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	return s
}

func (s *httpServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

func (s *httpServer) session(t *testing.T) *mcp.ClientSession {
	t.Helper()
	return s.sessionAt(t, nil)
}

// legacySession pins a client to protocol 2025-11-25: the last revision
// with sessions, for the tests of what sessions carry (server-to-client
// requests mid-call, per-client upstream sessions, idle timeouts,
// subscriptions, logging/setLevel). The go-sdk's default is 2026-07-28.
func legacySession() *mcp.ClientSessionOptions {
	return &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
}

// sessionAt is session with session options (nil: the go-sdk's defaults).
func (s *httpServer) sessionAt(t *testing.T, so *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url}, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// stop sends sig and waits for a clean exit.
func (s *httpServer) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("quiver exited with %v after %v\n%s", err, sig, s.log())
		}
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		t.Fatalf("quiver did not exit after %v\n%s", sig, s.log())
	}
}

func execute(t *testing.T, cs *mcp.ClientSession, toolID string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	return callTool(t, cs, "tool_execute", map[string]any{"tool_id": toolID, "args": args})
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &m)
	return res, m
}

// browseFirst returns the id of the first card for query.
func browseFirst(t *testing.T, cs *mcp.ClientSession, query string) string {
	t.Helper()
	_, m := callTool(t, cs, "tool_browse", map[string]any{"query": query, "top_k": 5})
	cards, _ := m["cards"].([]any)
	if len(cards) == 0 {
		t.Fatalf("no cards for %q: %v", query, m)
	}
	return cards[0].(map[string]any)["id"].(string)
}

// journey is browse -> hydrate -> execute -> error paths, the same over
// every transport.
func journey(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	// alpha offers a resource and a prompt, so their verbs are listed too.
	if strings.Join(names, ",") != "prompt_browse,prompt_get,resource_browse,resource_read,tool_browse,tool_execute,tool_hydrate,tool_view" {
		t.Fatalf("tools/list = %v", names)
	}
	_, m := callTool(t, cs, "tool_browse", map[string]any{"query": "add two numbers; the sum", "top_k": 5})
	var add string
	for _, c := range m["cards"].([]any) {
		if id := c.(map[string]any)["id"].(string); strings.HasPrefix(id, "alpha:add#") {
			add = id
		}
	}
	if add == "" {
		t.Fatalf("alpha's add not in the cards: %v", m)
	}
	_, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": add})
	if h["name"] != "add" || h["inputSchema"] == nil {
		t.Fatalf("hydrate: %v", h)
	}
	res, env := execute(t, cs, add, map[string]any{"a": 2, "b": 3})
	if res.IsError {
		t.Fatalf("execute: %v", env)
	}
	if sc := env["result"].(map[string]any)["structuredContent"].(map[string]any); sc["sum"] != 5.0 {
		t.Fatalf("2+3 = %v", sc)
	}
	res, m = execute(t, cs, add, map[string]any{"a": "two"})
	if !res.IsError || m["error"] != "ARGS_INVALID" {
		t.Fatalf("invalid args: %v", m)
	}
	res, m = callTool(t, cs, "tool_browse", map[string]any{"path": "/alpha/../x"})
	if !res.IsError || m["error"] != "PATH_INVALID" {
		t.Fatalf("bad path: %v", m)
	}
	res, m = callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": "alpha:nope#00000000"})
	if !res.IsError || m["error"] != "HYDRATE_FAILED" {
		t.Fatalf("unknown id: %v", m)
	}
}

func TestE2EStdio(t *testing.T) {
	cfg, record := fleetConfig(t, "gateway")
	cs := stdioSession(t, "--config", cfg)
	journey(t, cs)
	// Invalid arguments never reached the upstream: it recorded exactly
	// the one valid add.
	data, _ := os.ReadFile(record)
	if n := strings.Count(string(data), `"tool":"add"`); n != 1 {
		t.Fatalf("upstream saw %d add calls:\n%s", n, data)
	}
}

func TestE2EStaticCatalogWithoutConfig(t *testing.T) {
	// Without a configuration the state directory is the default one:
	// $XDG_STATE_HOME/quiver, here under the test's own directory.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	cs := stdioSession(t, "--gateway", "--catalog", "../../runtime/testdata/fleet.json")
	id := browseFirst(t, cs, "weather forecast for a city")
	if !strings.HasPrefix(id, "weather:get_forecast#") {
		t.Fatalf("first card %s", id)
	}
	_, env := execute(t, cs, id, map[string]any{"city": "Oslo"})
	if b, _ := json.Marshal(env["result"]); env["status"] != "ok" || !strings.Contains(string(b), "Oslo") {
		t.Fatalf("echo: %v", env)
	}
}

func TestE2EHTTP(t *testing.T) {
	cfg, record := fleetConfig(t, "gateway")
	// The information endpoints name the fleet only to the metrics token.
	const metricsToken = "e2e-metrics-token-of-at-least-32-bytes"
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("listen: {metrics_token_env: QUIVER_E2E_METRICS_TOKEN}\n")
	must(t, err)
	must(t, f.Close())
	t.Setenv("QUIVER_E2E_METRICS_TOKEN", metricsToken)
	srv := startHTTP(t, "--config", cfg)
	journey(t, srv.session(t))
	withToken := func(path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+metricsToken)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		return resp
	}

	// Anyone gets the status, and nothing else.
	resp, err := http.Get(srv.base + "/healthz")
	must(t, err)
	plain, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(plain)) != `{"status":"ok"}` {
		t.Fatalf("healthz without a token: %d %s", resp.StatusCode, plain)
	}
	if resp, err := http.Get(srv.base + "/metrics"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("metrics without a token: %v %v", resp, err)
	}

	resp = withToken("/healthz")
	var h map[string]any
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h["status"] != "ok" || h["catalog"].(map[string]any)["tool"].(float64) < 10 {
		t.Fatalf("healthz %d %v", resp.StatusCode, h)
	}
	if name, _ := h["state"].(string); name == "" {
		t.Fatalf("healthz names no state backend: %v", h)
	}
	// Each live upstream reports the revision negotiated with it (the
	// go-sdk test upstreams speak 2026-07-28).
	for _, u := range h["upstreams"].([]any) {
		if p, _ := u.(map[string]any)["protocol"].(string); p < "2024-11-05" {
			t.Fatalf("upstream without a protocol revision in healthz: %v", u)
		}
	}
	// DNS rebinding: a loopback listener answers its info endpoints only
	// to requests that name a loopback host, as it does /mcp.
	for _, p := range []string{"/healthz", "/metrics"} {
		req, _ := http.NewRequest("GET", srv.base+p, nil)
		req.Host = "attacker.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s with a foreign Host: %d, want 403", p, resp.StatusCode)
		}
	}
	resp = withToken("/metrics")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `quiver_meta_calls_total{code="ok",tool="tool_execute"}`) {
		t.Fatalf("metrics lack call counts:\n%.2000s", body)
	}
	if !regexp.MustCompile(`quiver_tool_calls_total\{code="ok",server="alpha",tool="\w+"\} \d`).Match(body) ||
		!strings.Contains(string(body), `quiver_tool_call_seconds_count{server="alpha",tool=`) {
		t.Fatalf("metrics lack per-tool series:\n%.4000s", body)
	}

	// 32 clients executing in parallel.
	cs0 := srv.session(t)
	echo := browseFirst(t, cs0, "echo the given text back")
	var wg sync.WaitGroup
	errs := make(chan error, 32*10)
	for c := 0; c < 32; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := mcp.NewClient(&mcp.Implementation{Name: "load", Version: "1"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url}, nil)
			if err != nil {
				errs <- err
				return
			}
			defer cs.Close()
			for i := 0; i < 10; i++ {
				text := fmt.Sprintf("c%d-%d", c, i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tool_execute", Arguments: map[string]any{"tool_id": echo, "args": map[string]any{"text": text}}})
				if err != nil {
					errs <- err
					return
				}
				b, _ := json.Marshal(res.StructuredContent)
				if res.IsError || !strings.Contains(string(b), text) {
					errs <- fmt.Errorf("call %s: %s", text, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	pids := upstreamPIDs(t, record)
	srv.stop(t, syscall.SIGTERM)
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("upstream child %d still alive after shutdown", pid)
		}
	}
}

func TestE2EProxyMode(t *testing.T) {
	cfg, _ := fleetConfig(t, "proxy")
	srv := startHTTP(t, "--config", cfg)
	cs := srv.session(t)
	var stripped, meta int
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		switch tool.Name {
		case "tool_hydrate", "tool_execute", "tool_view", "resource_browse", "resource_read", "prompt_browse", "prompt_get":
			meta++
		case "tool_browse":
			t.Fatal("proxy lists tool_browse")
		default:
			stripped++
			b, _ := json.Marshal(tool.InputSchema)
			if string(b) != `{"type":"object"}` {
				t.Fatalf("%s: schema %s", tool.Name, b)
			}
			// SEP-986, which the TypeScript SDK checks: namespace, name
			// and 10 hex digits of the tool_id's sha256.
			if !regexp.MustCompile(`^[a-z0-9_-]+\.[A-Za-z0-9_.-]+\.[0-9a-f]{10}$`).MatchString(tool.Name) || len(tool.Name) > 128 {
				t.Fatalf("entry %q is outside SEP-986", tool.Name)
			}
			names = append(names, tool.Name)
		}
	}
	// alpha's tools plus the static fleet's six.
	if meta != 7 || stripped < 6+10 {
		t.Fatalf("proxy lists %d stripped + %d meta", stripped, meta)
	}
	// The listed name stands for the tool_id wherever tool_hydrate and
	// tool_execute take one; a direct call of an entry is refused with
	// both names.
	echo := listedAs(names, "alpha", "echo")
	_, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": echo})
	id, _ := h["id"].(string)
	if !strings.HasPrefix(id, "alpha:echo#") {
		t.Fatalf("tool_hydrate(%s) = %v", echo, h)
	}
	res, env := execute(t, cs, echo, map[string]any{"text": "by name"})
	if res.IsError || field(env, "provenance.tool_id") != id || !strings.Contains(fmt.Sprint(env["result"]), "by name") {
		t.Fatalf("tool_execute(%s) = %v", echo, env)
	}
	res, m := callTool(t, cs, echo, map[string]any{"text": "direct"})
	if msg, _ := m["message"].(string); !res.IsError || errCode(m) != "ARGS_INVALID" || !strings.Contains(msg, id) || !strings.Contains(msg, echo) {
		t.Fatalf("calling %s directly: %v", echo, m)
	}
	srv.stop(t, syscall.SIGINT)
}

func TestE2EUpstreamDiesAndRecovers(t *testing.T) {
	cfg, _ := fleetConfig(t, "gateway")
	srv := startHTTP(t, "--config", cfg)
	cs := srv.session(t)
	crash := browseFirst(t, cs, "exit the server process in the middle of the call")
	if !strings.HasPrefix(crash, "alpha:crash#") {
		t.Fatalf("first card %s", crash)
	}
	res, m := execute(t, cs, crash, nil)
	if !res.IsError || m["error"] != "UPSTREAM_UNAVAILABLE" || m["retryable"] != true {
		t.Fatalf("crash: %v", m)
	}
	echo := browseFirst(t, cs, "echo the given text back")
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, m = execute(t, cs, echo, map[string]any{"text": "again"})
		if !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: %v\n%s", m, srv.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	srv.stop(t, syscall.SIGTERM)
}

func TestE2EServeErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("mode: sideways\n"), 0o644)
	cases := [][]string{
		{"serve"},
		{"serve", "--config", filepath.Join(dir, "missing.yaml")},
		{"serve", "--config", bad},
		{"serve", "--gateway", "--proxy", "--catalog", "../../runtime/testdata/fleet.json"},
	}
	for _, args := range cases {
		out, err := exec.Command(quiverBin, args...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || strings.Count(string(out), "\n") != 1 || !strings.HasPrefix(string(out), "quiver: ") {
			t.Errorf("%v: exit %v, output %q", args, err, out)
		}
	}
}

// upstreamPIDs reads the pids the test upstream recorded with its calls.
func upstreamPIDs(t *testing.T, record string) []int {
	t.Helper()
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			PID int `json:"pid"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.PID > 0 && !seen[rec.PID] {
			seen[rec.PID] = true
			pids = append(pids, rec.PID)
		}
	}
	if len(pids) == 0 {
		t.Fatal("the upstream recorded no pid")
	}
	return pids
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestE2ECancellationPropagates(t *testing.T) {
	cfg, record := fleetConfig(t, "gateway")
	cs := stdioSession(t, "--config", cfg)
	hang := browseFirst(t, cs, "block until the call is cancelled")
	if !strings.HasPrefix(hang, "alpha:hang#") {
		t.Fatalf("first card %s", hang)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tool_execute", Arguments: map[string]any{"tool_id": hang}})
		done <- err
	}()
	// Wait until the upstream has the call, then cancel it downstream.
	deadline := time.Now().Add(15 * time.Second)
	for {
		data, _ := os.ReadFile(record)
		if strings.Contains(string(data), `"tool":"hang"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream never saw the call")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	for {
		data, _ := os.ReadFile(record)
		if strings.Contains(string(data), `"event":"cancelled"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream never saw the cancellation:\n%s", data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startUpstreamHTTP runs the test upstream over streamable HTTP, requiring
// bearer token on every request, and returns its URL and record file.
func startUpstreamHTTP(t *testing.T, addr, token string) (url, record string) {
	t.Helper()
	record = filepath.Join(t.TempDir(), "http-calls.jsonl")
	cmd := exec.Command(upstreamBin, "-transport", "http", "-addr", addr, "-name", "remote", "-record", record, "-fail-auth", "-token", token)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("upstream did not print its URL: %v", err)
	}
	return strings.TrimSpace(line), record
}

func TestE2ECredentialBoundary(t *testing.T) {
	upURL, upRecord := startUpstreamHTTP(t, "127.0.0.1:0", "upstream-secret")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`environment: dev
state_dir: %s
upstreams:
  - name: remote
    url: %s
    credentials: {bearer_env: REMOTE_TOKEN}
`, filepath.Join(dir, "state"), upURL)), 0o644)
	t.Setenv("REMOTE_TOKEN", "upstream-secret")
	srv := startHTTP(t, "--config", cfg)

	// The downstream client presents its own bearer token to quiver.
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer client-token-must-not-leak"}}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	who := browseFirst(t, cs, "return the HTTP request headers this call arrived with")
	res, env := execute(t, cs, who, nil)
	if res.IsError {
		t.Fatalf("whoami: %v", env)
	}
	b, _ := json.Marshal(env["result"])
	if !strings.Contains(string(b), "upstream-secret") || strings.Contains(string(b), "client-token") {
		t.Fatalf("the upstream saw: %s", b)
	}
	data, _ := os.ReadFile(upRecord)
	if strings.Contains(string(data), "client-token-must-not-leak") {
		t.Fatal("the client's token reached the upstream")
	}
	srv.stop(t, syscall.SIGTERM)
}

type headerRT map[string]string

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestE2ELateUpstreamJoins(t *testing.T) {
	// Reserve a port, start quiver against it before the upstream exists,
	// then bring the upstream up: its tools join the catalog.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`environment: dev
state_dir: %s
upstreams:
  - name: late
    url: http://%s/mcp
    connect_timeout: 1s
    credentials: {bearer_env: LATE_TOKEN}
  - name: fleet
    catalog: %s
`, filepath.Join(dir, "state"), addr, mustAbs(t, "../../runtime/testdata/fleet.json"))), 0o644)
	t.Setenv("LATE_TOKEN", "t")
	srv := startHTTP(t, "--config", cfg)
	cs := srv.session(t)
	if id := browseFirst(t, cs, "weather forecast"); !strings.HasPrefix(id, "weather:") {
		t.Fatalf("static fleet missing: %s", id)
	}
	startUpstreamHTTP(t, addr, "t")
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, m := callTool(t, cs, "tool_browse", map[string]any{"path": "/late"})
		if cards, ok := m["cards"].([]any); ok && len(cards) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late upstream never joined\n%s", srv.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	srv.stop(t, syscall.SIGTERM)
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestE2EArtifactsSurviveKill(t *testing.T) {
	cfg, _ := fleetConfig(t, "gateway")
	start := func() (*mcp.ClientSession, *exec.Cmd) {
		cmd := exec.Command(quiverBin, "serve", "--config", cfg)
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs, cmd
	}
	cs, cmd := start()
	big := browseFirst(t, cs, "return a large realistic application log as text")
	res, env := execute(t, cs, big, map[string]any{"lines": 20000})
	arts, _ := env["artifacts"].([]any)
	if res.IsError || len(arts) == 0 {
		t.Fatalf("big_log: %v", env)
	}
	handle := arts[0].(map[string]any)["handle"].(string)
	// kill -9: no chance to flush anything.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cs.Close()

	cs, _ = start()
	defer cs.Close()
	res, v := callTool(t, cs, "tool_view", map[string]any{"handle": handle, "selector": map[string]any{"type": "lines", "start": -1}})
	if res.IsError || strings.TrimSpace(v["text"].(string)) == "" {
		t.Fatalf("after restart: %v", v)
	}
}
