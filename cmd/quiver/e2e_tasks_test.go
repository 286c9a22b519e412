package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// taskClient speaks MCP 2026-07-28 as plain JSON-RPC POSTs, so that the
// test sees the tasks extension's wire as it is (the go-sdk client keeps
// no task of a tools/call answer).
type taskClient struct {
	url, token string
	// declare puts the tasks extension in each request's capabilities.
	declare bool
}

type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (c taskClient) call(t *testing.T, method, name string, params map[string]any) (map[string]any, *rpcError) {
	t.Helper()
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if c.declare {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{mcp.MetaKeyProtocolVersion: "2026-07-28", mcp.MetaKeyClientCapabilities: caps,
		mcp.MetaKeyClientInfo: map[string]any{"name": "tasks-e2e", "version": "1"}}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	must(t, err)
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var msg []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				msg = []byte(d)
			}
		}
	} else {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		msg = b.Bytes()
	}
	var out struct {
		Result map[string]any `json:"result"`
		Error  *rpcError      `json:"error"`
	}
	if err := json.Unmarshal(msg, &out); err != nil {
		t.Fatalf("%s: status %d, %v: %s", method, resp.StatusCode, err, msg)
	}
	return out.Result, out.Error
}

// tasksPolicy lets everyone list and call, and only alice answer
// elicitations.
const tasksPolicy = `policy_id: tasks
rules:
  - id: tools
    priority: 10
    effect: allow
    match: {action: [list, call]}
  - id: alice-elicit
    priority: 10
    effect: allow
    match: {principal: {sub: alice}, action: [elicit]}
`

// tasksConfig writes a configuration in mode with bearer auth, a policy,
// and one upstream that offers the tasks extension.
func tasksConfig(t *testing.T, mode, transport string) (cfgPath, record, stateDir string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "calls.jsonl")
	stateDir = filepath.Join(dir, "state")
	upstream := fmt.Sprintf("command: [%q, \"-name\", \"up\", \"-tasks\", \"-record\", %q]", upstreamBin, record)
	if transport == "http" {
		upstream = "url: " + startTaskUpstreamHTTP(t, record)
	}
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(tasksPolicy), 0o644))
	cfg := fmt.Sprintf(`mode: %s
environment: dev
state_dir: %s
policy: {file: policy.yaml}
admin: {token_env: QUIVER_E2E_ADMIN_TOKEN}
auth:
  issuers:
    - name: ci
      iss: quiver-ci
      audiences: [quiver]
      alg: HS256
      hs256_secret_env: QUIVER_E2E_JWT_SECRET
upstreams:
  - name: up
    %s
`, mode, stateDir, upstream)
	cfgPath = filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	return cfgPath, record, stateDir
}

// startTaskUpstreamHTTP starts the test upstream with -tasks over
// stateless streamable HTTP (2026-07-28) and returns its URL.
func startTaskUpstreamHTTP(t *testing.T, record string) string {
	t.Helper()
	cmd := exec.Command(upstreamBin, "-transport", "http", "-stateless", "-addr", "127.0.0.1:0", "-name", "up", "-tasks", "-record", record)
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = io.Discard
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("upstream did not print its URL: %v", err)
	}
	return strings.TrimSpace(line)
}

// tool calls an upstream tool: by its listed name in direct mode, through
// tool_execute in gateway mode.
func (c taskClient) tool(t *testing.T, mode, tool string, args map[string]any) (map[string]any, *rpcError) {
	t.Helper()
	if mode == "direct" {
		return c.call(t, "tools/call", "up__"+tool, map[string]any{"name": "up__" + tool, "arguments": args})
	}
	if mode == "proxy" {
		// Proxy entries are named <namespace>.<name>.<10 hex>, and
		// tool_execute takes that name for the tool_id.
		list, e := c.call(t, "tools/list", "", map[string]any{})
		if e != nil {
			t.Fatalf("tools/list: %v", e)
		}
		name := regexp.MustCompile(`up\.` + tool + `\.[0-9a-f]{10}`).FindString(fmt.Sprint(list["tools"]))
		if name == "" {
			t.Fatalf("no proxy entry for up:%s in %v", tool, list)
		}
		return c.call(t, "tools/call", "tool_execute", map[string]any{"name": "tool_execute", "arguments": map[string]any{"tool_id": name, "args": args}})
	}
	browse, e := c.call(t, "tools/call", "tool_browse", map[string]any{"name": "tool_browse", "arguments": map[string]any{"query": tool, "top_k": 50}})
	if e != nil {
		t.Fatalf("tool_browse: %v", e)
	}
	id := ""
	for _, m := range regexp.MustCompile(`up:[a-z_]+#[0-9a-f]{8}`).FindAllString(fmt.Sprint(browse["content"]), -1) {
		if strings.HasPrefix(m, "up:"+tool+"#") {
			id = m
		}
	}
	if id == "" {
		t.Fatalf("no card for up:%s in %v", tool, browse)
	}
	return c.call(t, "tools/call", "tool_execute", map[string]any{"name": "tool_execute", "arguments": map[string]any{"tool_id": id, "args": args}})
}

// taskEvents counts the tasks/* requests the upstream received.
func taskEvents(t *testing.T, record string) int {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), `"event":"task"`)
}

// TestE2ETasks: in direct, gateway and proxy modes, with a stdio upstream and a
// streamable HTTP one, a 2026-07-28 client that
// declares the tasks extension gets the upstream's task under quiver's
// id, polls it to completion and gets the result through the firewall (a
// large one becomes an artifact), answers an input_required task with
// tasks/update, and cancels one; an input request the policy refuses
// cancels the task, upstream too, and an answer an operator's kill rule
// refuses does not reach the upstream; another principal's task id, a forged
// one and an expired one are refused with nothing reaching the upstream,
// and receipted; a client that does not declare the extension gets a
// synchronous result.
func TestE2ETasks(t *testing.T) {
	t.Setenv("QUIVER_E2E_JWT_SECRET", safetySecret)
	t.Setenv("QUIVER_E2E_ADMIN_TOKEN", safetyAdminToken)
	for _, tc := range []struct{ mode, transport string }{{"direct", "stdio"}, {"gateway", "stdio"}, {"proxy", "stdio"}, {"direct", "http"}} {
		t.Run(tc.mode+"/"+tc.transport, func(t *testing.T) { tasksE2E(t, tc.mode, tc.transport) })
	}
}

func tasksE2E(t *testing.T, mode, transport string) {
	cfg, record, stateDir := tasksConfig(t, mode, transport)
	srv := startHTTP(t, "--config", cfg)
	alice := taskClient{url: srv.url, token: hsToken(t, "alice", nil), declare: true}
	bob := taskClient{url: srv.url, token: hsToken(t, "bob", nil), declare: true}
	plain := taskClient{url: srv.url, token: alice.token}
	defer func() {
		if t.Failed() {
			t.Logf("quiver log:\n%s", srv.log())
		}
	}()

	// The listener declares the extension once the upstream offers it.
	waitTasksDeclared(t, alice)
	if mode == "direct" {
		for i := 0; ; i++ {
			tools, _ := alice.call(t, "tools/list", "", map[string]any{})
			if strings.Contains(fmt.Sprint(tools), "up__report") {
				break
			}
			if i == 100 {
				t.Fatalf("up__report is not listed: %v", tools)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// A large report: a task, polled to completion, kept out of the
	// context by the firewall.
	created, e := alice.tool(t, mode, "report", map[string]any{"size": 200000})
	if e != nil || created["resultType"] != "task" || created["status"] != "working" {
		t.Fatalf("tools/call = %v, %v", created, e)
	}
	id, _ := created["taskId"].(string)
	if !strings.HasPrefix(id, "qt1.") {
		t.Fatalf("task id %q is not quiver's", id)
	}
	var done map[string]any
	for range 5 {
		got, e := alice.call(t, "tasks/get", id, map[string]any{"taskId": id})
		if e != nil || got["resultType"] != "complete" || got["taskId"] != id {
			t.Fatalf("tasks/get = %v, %v", got, e)
		}
		if got["status"] == "completed" {
			done = got
			break
		}
	}
	if done == nil {
		t.Fatal("the task did not complete")
	}
	res, _ := json.Marshal(done["result"])
	if len(res) > 50000 || !strings.Contains(string(res), "art_") {
		t.Fatalf("the large result was not kept out of the context (%d bytes): %.600s", len(res), res)
	}

	// An input_required task, answered with tasks/update.
	ask := func(c taskClient) (string, map[string]any) {
		t.Helper()
		created, e := c.tool(t, mode, "ask_task", map[string]any{"question": "name?"})
		if e != nil || created["resultType"] != "task" {
			t.Fatalf("ask_task = %v, %v", created, e)
		}
		id := created["taskId"].(string)
		for range 5 {
			got, e := c.call(t, "tasks/get", id, map[string]any{"taskId": id})
			if e != nil {
				t.Fatal(e)
			}
			if got["status"] != "working" {
				return id, got
			}
		}
		t.Fatal("the task kept working")
		return "", nil
	}
	askID, asked := ask(alice)
	if asked["status"] != "input_required" || !strings.Contains(fmt.Sprint(asked["inputRequests"]), "name?") {
		t.Fatalf("no input request relayed: %v", asked)
	}
	if _, e := alice.call(t, "tasks/update", askID, map[string]any{"taskId": askID,
		"inputResponses": map[string]any{"q1": map[string]any{"action": "accept", "content": map[string]any{"answer": "Luca"}}}}); e != nil {
		t.Fatalf("tasks/update: %v", e)
	}
	got, e := alice.call(t, "tasks/get", askID, map[string]any{"taskId": askID})
	if e != nil || got["status"] != "completed" || !strings.Contains(fmt.Sprint(got["result"]), "asked: accept map[answer:Luca]") {
		t.Fatalf("answered task = %v, %v", got, e)
	}

	// bob may not answer elicitations: his task is cancelled, upstream
	// too.
	cancels := strings.Count(readFile(t, record), `"method":"tasks/cancel"`)
	_, denied := ask(bob)
	if denied["status"] != "cancelled" || !strings.Contains(fmt.Sprint(denied["statusMessage"]), "RELAY_DENIED") || denied["inputRequests"] != nil {
		t.Fatalf("bob's input request = %v, want a task cancelled with RELAY_DENIED", denied)
	}
	if n := strings.Count(readFile(t, record), `"method":"tasks/cancel"`); n != cancels+1 {
		t.Errorf("the refused task was not cancelled upstream (%d cancels, want %d)", n, cancels+1)
	}

	// A cancelled task.
	created, _ = alice.tool(t, mode, "forever", map[string]any{})
	forever := created["taskId"].(string)
	if _, e := alice.call(t, "tasks/cancel", forever, map[string]any{"taskId": forever}); e != nil {
		t.Fatalf("tasks/cancel: %v", e)
	}
	if got, e := alice.call(t, "tasks/get", forever, map[string]any{"taskId": forever}); e != nil || got["status"] != "cancelled" {
		t.Fatalf("cancelled task = %v, %v", got, e)
	}

	// Refusals: nothing reaches the upstream.
	created, _ = alice.tool(t, mode, "brief", map[string]any{})
	brief := created["taskId"].(string)
	time.Sleep(20 * time.Millisecond) // past its 1 ms lifetime
	forged := id[:len(id)-4] + "AAAA"
	before := taskEvents(t, record)
	for _, tc := range []struct {
		name string
		c    taskClient
		id   string
		code int64
		msg  string
	}{
		{"another principal", bob, id, -32602, "Task not found"},
		{"forged", alice, forged, -32602, "Task not found"},
		{"upstream's own id", alice, "0123456789abcdef", -32602, "Task not found"},
		{"expired", alice, brief, -32602, "Task has expired"},
		{"undeclared", plain, id, -32021, "extension"},
	} {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			_, e := tc.c.call(t, m, tc.id, map[string]any{"taskId": tc.id, "inputResponses": map[string]any{}})
			if e == nil || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("%s: %s = %+v, want %d %q", tc.name, m, e, tc.code, tc.msg)
			}
		}
	}
	// The extension's routing header must name the task.
	if _, e := alice.call(t, "tasks/get", "qt1.another", map[string]any{"taskId": id}); e == nil || e.Code != -32020 {
		t.Errorf("tasks/get with another Mcp-Name = %+v, want -32020", e)
	}
	if after := taskEvents(t, record); after != before {
		t.Errorf("%d refused task requests reached the upstream", after-before)
	}
	env := &safetyEnv{receipts: filepath.Join(stateDir, "receipts")}
	env.waitReceipt(t, "bob's refused tasks/get", func(r map[string]any) bool {
		return field(r, "mcp.method") == "tasks/get" && field(r, "principal.sub") == "bob" && field(r, "outcome.error_code") == "TASK_INVALID" &&
			strings.Contains(fmt.Sprint(field(r, "decision.reason_codes")), "TASK_FOREIGN") && field(r, "decision.result") == "deny"
	})
	env.waitReceipt(t, "bob's refused input request", func(r map[string]any) bool {
		return field(r, "mcp.method") == "elicitation/create" && field(r, "principal.sub") == "bob" && field(r, "decision.result") == "deny"
	})

	// A client that does not declare the extension gets the result.
	sync, e := plain.tool(t, mode, "report", map[string]any{"size": 40})
	if e != nil || sync["resultType"] != "complete" || !strings.Contains(fmt.Sprint(sync["content"]), "line 0 of") {
		t.Fatalf("undeclared tools/call = %v, %v", sync, e)
	}

	// An operator's kill rule on the upstream, switched on while a task
	// waits for input: the answer is refused and does not reach it.
	killedID, _ := ask(alice)
	adminAt(t, srv.base, http.MethodPost, "/admin/v1/kill", map[string]any{"id": "e2e-tasks", "server": []string{"up"}, "reason": "e2e tasks"})
	updates := strings.Count(readFile(t, record), `"method":"tasks/update"`)
	if _, e := alice.call(t, "tasks/update", killedID, map[string]any{"taskId": killedID,
		"inputResponses": map[string]any{"q1": map[string]any{"action": "accept", "content": map[string]any{"answer": "x"}}}}); e == nil || !strings.Contains(e.Message, "RELAY_DENIED") {
		t.Errorf("tasks/update under a kill rule = %+v, want RELAY_DENIED", e)
	}
	if n := strings.Count(readFile(t, record), `"method":"tasks/update"`); n != updates {
		t.Errorf("a refused tasks/update reached the upstream")
	}
	adminAt(t, srv.base, http.MethodDelete, "/admin/v1/kill/e2e-tasks", nil)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestE2ETasksNotDeclared: quiver declares the tasks extension only while
// an upstream offers tasks, and never to a session (2025-11-25 and older).
func TestE2ETasksNotDeclared(t *testing.T) {
	t.Parallel()
	srv := startHTTP(t, "--config", mrtrConfig(t, "direct"))
	c := taskClient{url: srv.url, declare: true}
	disc, e := c.call(t, "server/discover", "", map[string]any{})
	if e != nil || disc["capabilities"] == nil || strings.Contains(fmt.Sprint(disc["capabilities"]), "io.modelcontextprotocol/tasks") {
		t.Fatalf("server/discover without a tasks upstream = %v, %v", disc, e)
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("mode: direct\nenvironment: dev\nstate_dir: %s\nupstreams:\n  - name: up\n    command: [%q, \"-tasks\"]\n",
		filepath.Join(dir, "state"), upstreamBin)), 0o644))
	srv = startHTTP(t, "--config", cfg)
	waitTasksDeclared(t, taskClient{url: srv.url, declare: true})
	cs := srv.sessionAt(t, legacySession())
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil || caps.Extensions != nil {
		t.Fatalf("a 2025-11-25 session's capabilities = %+v", caps)
	}
}

// waitTasksDeclared waits until server/discover declares the extension.
func waitTasksDeclared(t *testing.T, c taskClient) {
	t.Helper()
	for i := 0; ; i++ {
		disc, e := c.call(t, "server/discover", "", map[string]any{})
		if e == nil && strings.Contains(fmt.Sprint(disc["capabilities"]), "io.modelcontextprotocol/tasks") {
			return
		}
		if i == 200 {
			t.Fatalf("server/discover with a tasks upstream = %v, %v", disc, e)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stdioTasks speaks MCP 2026-07-28 to `quiver serve` over stdio as JSON
// lines (no initialize: each request carries its revision).
type stdioTasks struct {
	in    io.Writer
	lines chan []byte
	id    int
}

func startStdioTasks(t *testing.T, cfg string) *stdioTasks {
	t.Helper()
	cmd := exec.Command(quiverBin, "serve", "--config", cfg)
	in, err := cmd.StdinPipe()
	must(t, err)
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = testWriter{t}
	must(t, cmd.Start())
	s := &stdioTasks{in: in, lines: make(chan []byte, 16)}
	done := make(chan struct{})
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			select {
			case s.lines <- append([]byte(nil), sc.Bytes()...):
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return s
}

func (s *stdioTasks) call(t *testing.T, method string, params map[string]any, declare bool) (map[string]any, *rpcError) {
	t.Helper()
	caps := map[string]any{}
	if declare {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{mcp.MetaKeyProtocolVersion: "2026-07-28", mcp.MetaKeyClientCapabilities: caps,
		mcp.MetaKeyClientInfo: map[string]any{"name": "tasks-e2e", "version": "1"}}
	s.id++
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.id, "method": method, "params": params})
	must(t, err)
	_, err = s.in.Write(append(b, '\n'))
	must(t, err)
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("%s: quiver closed its output", method)
			}
			var msg struct {
				ID     *int           `json:"id"`
				Result map[string]any `json:"result"`
				Error  *rpcError      `json:"error"`
			}
			if json.Unmarshal(line, &msg) == nil && msg.ID != nil && *msg.ID == s.id {
				return msg.Result, msg.Error
			}
		case <-timeout:
			t.Fatalf("%s: no answer", method)
		}
	}
}

// TestE2ETasksStdioListener: the tasks relay on quiver's stdio listener,
// for the local principal.
func TestE2ETasksStdioListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	record := filepath.Join(dir, "calls.jsonl")
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("mode: direct\nenvironment: dev\nstate_dir: %s\nupstreams:\n  - name: up\n    command: [%q, \"-tasks\", \"-record\", %q]\n",
		filepath.Join(dir, "state"), upstreamBin, record)), 0o644))
	s := startStdioTasks(t, cfg)
	for i := 0; ; i++ {
		disc, _ := s.call(t, "server/discover", map[string]any{}, true)
		if strings.Contains(fmt.Sprint(disc["capabilities"]), "io.modelcontextprotocol/tasks") {
			break
		}
		if i == 200 {
			t.Fatalf("server/discover = %v", disc)
		}
		time.Sleep(50 * time.Millisecond)
	}
	created, e := s.call(t, "tools/call", map[string]any{"name": "up__report", "arguments": map[string]any{"size": 200000}}, true)
	if e != nil || created["resultType"] != "task" {
		t.Fatalf("tools/call = %v, %v", created, e)
	}
	id := created["taskId"].(string)
	var got map[string]any
	for range 5 {
		if got, e = s.call(t, "tasks/get", map[string]any{"taskId": id}, true); e != nil || got["status"] == "completed" {
			break
		}
	}
	if res, _ := json.Marshal(got["result"]); e != nil || got["status"] != "completed" || len(res) > 50000 || !strings.Contains(string(res), "art_") {
		t.Fatalf("tasks/get = %.500v, %v", got, e)
	}
	before := taskEvents(t, record)
	if _, e := s.call(t, "tasks/get", map[string]any{"taskId": id[:len(id)-3] + "AAA"}, true); e == nil || e.Code != -32602 {
		t.Errorf("a forged id: %+v, want -32602", e)
	}
	if _, e := s.call(t, "tasks/cancel", map[string]any{"taskId": id}, false); e == nil || e.Code != -32021 {
		t.Errorf("undeclared: %+v, want -32021", e)
	}
	if after := taskEvents(t, record); after != before {
		t.Errorf("%d refused task requests reached the upstream", after-before)
	}
	sync, e := s.call(t, "tools/call", map[string]any{"name": "up__report", "arguments": map[string]any{"size": 40}}, false)
	if e != nil || sync["resultType"] != "complete" {
		t.Fatalf("undeclared tools/call = %v, %v", sync, e)
	}
}
