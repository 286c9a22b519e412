//lint:file-ignore SA1019 sampling and logging are deprecated in protocol 2026-07-28 only; quiver forwards them for the protocols that have them, which is what these tests check.

package main

// End-to-end tests of two-way forwarding (issue #9): quiver --direct in
// front of the test upstream started with -extras, whose tools sample,
// elicit, log and progress send requests and notifications back to the
// client while their call is in flight. Every client answers with its own
// marker, so an answer delivered to the wrong client is detected.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fwdTimeout bounds every single step of these tests.
const fwdTimeout = 30 * time.Second

// fwdSetup describes the configuration fwdConfig writes.
type fwdSetup struct {
	sessions string // shared | per_client ("" = the default)
	prefix   *string
	policy   string // policy file contents ("" = no policy)
	upstream string // YAML lines added to the upstream's entry
}

// fwdConfig writes a direct-mode configuration with one upstream "up": the
// test upstream with -extras at protocol 2025-11-25 (the go-sdk sends
// sampling and elicitation requests only there), recording its calls. It
// returns the configuration's path and the record file.
func fwdConfig(t *testing.T, s fwdSetup) (cfgPath, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "calls.jsonl")
	var up strings.Builder
	fmt.Fprintf(&up, "  - name: up\n    command: [%q, \"-extras\", \"-max-protocol\", \"2025-11-25\", \"-name\", \"up\", \"-record\", %q]\n    connect_timeout: 20s\n", upstreamBin, record)
	if s.sessions != "" {
		fmt.Fprintf(&up, "    sessions: %s\n", s.sessions)
	}
	if s.prefix != nil {
		fmt.Fprintf(&up, "    tool_prefix: %q\n", *s.prefix)
	}
	up.WriteString(s.upstream)
	top := ""
	if s.policy != "" {
		must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(s.policy), 0o644))
		top = "policy: {file: policy.yaml}\n"
	}
	cfg := fmt.Sprintf("mode: direct\nenvironment: dev\nstate_dir: %s\nlog: {level: debug}\n%supstreams:\n%s",
		filepath.Join(dir, "state"), top, up.String())
	cfgPath = filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	return cfgPath, record
}

// fwdClient is one downstream client with handlers that record what quiver
// forwarded to it and answer with the client's own name.
type fwdClient struct {
	name string
	cs   *mcp.ClientSession
	wire *fwdWireLog // nil over stdio
	// so are its session options: protocol 2025-11-25 unless a test
	// asks for the go-sdk's default (2026-07-28).
	so *mcp.ClientSessionOptions

	// sampleHook, when set, answers sampling/createMessage instead of the
	// default answer (after the prompt was recorded).
	sampleHook func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)

	// delayOf, when set, delays the answer to a prompt or question.
	delayOf func(text string) time.Duration

	// roots are the roots the client announces (roots/list).
	roots []*mcp.Root

	mu        sync.Mutex
	prompts   []string
	questions []string
	progress  []*mcp.ProgressNotificationParams
	logs      []*mcp.LoggingMessageParams
}

func newFwdClient(name string) *fwdClient { return &fwdClient{name: name, so: legacySession()} }

// options returns the client options: progress and log handlers always,
// sampling and elicitation handlers when handlers is set (which is what
// makes the go-sdk client announce those capabilities).
func (c *fwdClient) options(handlers bool) *mcp.ClientOptions {
	o := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, r.Params)
			c.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, r.Params)
			c.mu.Unlock()
		},
	}
	if handlers {
		o.CreateMessageHandler = c.sample
		o.ElicitationHandler = c.elicit
	}
	return o
}

func (c *fwdClient) sample(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var prompt string
	if len(req.Params.Messages) > 0 {
		if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
			prompt = tc.Text
		}
	}
	c.mu.Lock()
	c.prompts = append(c.prompts, prompt)
	c.mu.Unlock()
	if c.delayOf != nil {
		time.Sleep(c.delayOf(prompt))
	}
	if c.sampleHook != nil {
		return c.sampleHook(ctx, req)
	}
	return &mcp.CreateMessageResult{
		Model:   "model-" + c.name,
		Role:    "assistant",
		Content: &mcp.TextContent{Text: "answer-of-" + c.name + " to " + prompt},
	}, nil
}

func (c *fwdClient) elicit(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	c.mu.Lock()
	c.questions = append(c.questions, req.Params.Message)
	c.mu.Unlock()
	if c.delayOf != nil {
		time.Sleep(c.delayOf(req.Params.Message))
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "answer-of-" + c.name + " to " + req.Params.Message}}, nil
}

// seen returns copies of what the handlers recorded.
func (c *fwdClient) seen() (prompts, questions []string, progress []*mcp.ProgressNotificationParams, logs []*mcp.LoggingMessageParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.prompts), slices.Clone(c.questions), slices.Clone(c.progress), slices.Clone(c.logs)
}

// connectHTTP connects c to quiver's HTTP listener, recording what it
// receives on the wire.
func (c *fwdClient) connectHTTP(t *testing.T, srv *httpServer, handlers bool) *fwdClient {
	t.Helper()
	c.wire = &fwdWireLog{}
	client := mcp.NewClient(&mcp.Implementation{Name: c.name, Version: "1"}, c.options(handlers))
	client.AddRoots(c.roots...)
	ctx, cancel := context.WithTimeout(context.Background(), fwdTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: &http.Client{Transport: c.wire}}, c.so)
	if err != nil {
		t.Fatalf("%s: connect: %v", c.name, err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

// connectStdio starts `quiver serve args...` as c's child over stdio.
func (c *fwdClient) connectStdio(t *testing.T, handlers bool, args ...string) *fwdClient {
	t.Helper()
	cmd := exec.Command(quiverBin, append([]string{"serve"}, args...)...)
	cmd.Stderr = testWriter{t}
	client := mcp.NewClient(&mcp.Implementation{Name: c.name, Version: "1"}, c.options(handlers))
	client.AddRoots(c.roots...)
	ctx, cancel := context.WithTimeout(context.Background(), fwdTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, c.so)
	if err != nil {
		t.Fatalf("%s: connect: %v", c.name, err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

// call calls tool and returns the text of its result. It does not fail the
// test, so it may run on any goroutine.
func (c *fwdClient) call(ctx context.Context, tool string, args map[string]any, progressToken any) (text string, isError bool, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fwdTimeout)
		defer cancel()
	}
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		return "", false, fmt.Errorf("%s: %s: %w", c.name, tool, err)
	}
	var parts []string
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError, nil
}

// mustCall calls tool on the test goroutine and fails unless the result is
// a success.
func (c *fwdClient) mustCall(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	text, isErr, err := c.call(context.Background(), tool, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if isErr {
		t.Fatalf("%s: %s(%v) failed: %s", c.name, tool, args, text)
	}
	return text
}

// waitTools waits until quiver lists every tool of names to c.
func (c *fwdClient) waitTools(t *testing.T, names ...string) {
	t.Helper()
	deadline := time.Now().Add(fwdTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), fwdTimeout)
		res, err := c.cs.ListTools(ctx, nil)
		cancel()
		if err != nil {
			t.Fatalf("%s: tools/list: %v", c.name, err)
		}
		have := map[string]bool{}
		for _, tool := range res.Tools {
			have[tool.Name] = true
		}
		missing := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return have[n] })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: tools %v never listed (have %v)", c.name, missing, have)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fwdCheckSample checks the text of a sample call made by c with prompt.
func fwdCheckSample(c *fwdClient, other, prompt, text string, isErr bool) error {
	want := fmt.Sprintf("sampled: model-%s answer-of-%s to %s", c.name, c.name, prompt)
	if isErr || text != want || strings.Contains(text, other) {
		return fmt.Errorf("%s: sample(%q) = %q (isError %v), want %q", c.name, prompt, text, isErr, want)
	}
	return nil
}

// fwdCheckElicit checks the text of an elicit call made by c with question.
func fwdCheckElicit(c *fwdClient, other, question, text string, isErr bool) error {
	content, _ := json.Marshal(map[string]any{"answer": "answer-of-" + c.name + " to " + question})
	want := fmt.Sprintf("elicited: accept %s", content)
	if isErr || text != want || strings.Contains(text, other) {
		return fmt.Errorf("%s: elicit(%q) = %q (isError %v), want %q", c.name, question, text, isErr, want)
	}
	return nil
}

// fwdCheckOwnPrompts checks that c's handlers saw exactly the prompts and
// questions c sent, and nothing of another client.
func fwdCheckOwnPrompts(t *testing.T, c *fwdClient, wantPrompts, wantQuestions []string) {
	t.Helper()
	prompts, questions, _, _ := c.seen()
	slices.Sort(prompts)
	slices.Sort(questions)
	wantPrompts, wantQuestions = slices.Sorted(slices.Values(wantPrompts)), slices.Sorted(slices.Values(wantQuestions))
	if !slices.Equal(prompts, wantPrompts) {
		t.Errorf("%s's sampling handler saw %q, want %q", c.name, prompts, wantPrompts)
	}
	if !slices.Equal(questions, wantQuestions) {
		t.Errorf("%s's elicitation handler saw %q, want %q", c.name, questions, wantQuestions)
	}
}

// fwdRoundTrips makes rounds of one sample and one elicit call from every
// client: in each round the clients start together (a barrier), so their
// calls overlap, while each client's own calls follow one another. (Calls
// of one client that overlap are TestE2EForwardSameClientConcurrent's.)
// Each client must get its own answers, its handlers must see only its
// prompts, and over HTTP each request must arrive on the stream of its own
// call.
func fwdRoundTrips(t *testing.T, prefix string, rounds int, clients ...*fwdClient) {
	t.Helper()
	errs := make(chan error, len(clients)*rounds*2)
	want := map[*fwdClient]*[2][]string{}
	for _, c := range clients {
		want[c] = &[2][]string{}
	}
	for r := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, c := range clients {
			other := clients[(i+1)%len(clients)].name
			prompt := fmt.Sprintf("prompt of %s round %d", c.name, r)
			question := fmt.Sprintf("question of %s round %d", c.name, r)
			want[c][0], want[c][1] = append(want[c][0], prompt), append(want[c][1], question)
			wg.Go(func() {
				<-start
				text, isErr, err := c.call(context.Background(), prefix+"sample", map[string]any{"prompt": prompt}, nil)
				if err == nil {
					err = fwdCheckSample(c, other, prompt, text, isErr)
				}
				if err != nil {
					errs <- err
				}
				text, isErr, err = c.call(context.Background(), prefix+"elicit", map[string]any{"question": question}, nil)
				if err == nil {
					err = fwdCheckElicit(c, other, question, text, isErr)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		close(start)
		wg.Wait()
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, c := range clients {
		fwdCheckOwnPrompts(t, c, want[c][0], want[c][1])
		if c.wire != nil {
			for _, m := range c.wire.misrouted(false) {
				t.Errorf("%s: %s", c.name, m)
			}
		}
	}
}

// fwdRecorded reads the upstream's record file.
func fwdRecorded(t *testing.T, record string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(record)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// fwdWaitRecorded waits until the upstream recorded an event for tool
// ("call" or "cancelled") n times.
func fwdWaitRecorded(t *testing.T, record, event, tool string, n int) {
	t.Helper()
	deadline := time.Now().Add(fwdTimeout)
	for {
		got := 0
		for _, m := range fwdRecorded(t, record) {
			if m["event"] == event && m["tool"] == tool {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream recorded %d %s events of %s, want %d", got, event, tool, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fwdWaitFor polls cond for up to d.
func fwdWaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// fwdWireLog is an http.RoundTripper that records, in arrival order, every
// JSON-RPC message the client reads from quiver (SSE data and JSON bodies),
// with the stream it came on. Within one stream the order is the order
// quiver sent them in.
type fwdWireLog struct {
	mu      sync.Mutex
	msgs    []map[string]any
	streams []string
}

// fwdStreamOf names the stream of an HTTP request: "GET" for the standalone
// stream, "tools/call <arguments>" for a tool call's POST, else the method.
func fwdStreamOf(r *http.Request) string {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return r.Method
	}
	body, err := r.GetBody()
	if err != nil {
		return "POST"
	}
	defer body.Close()
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if b, err := io.ReadAll(body); err != nil || json.Unmarshal(b, &msg) != nil {
		return "POST"
	}
	if msg.Method == "tools/call" {
		return msg.Method + " " + string(msg.Params.Arguments)
	}
	return msg.Method
}

func (w *fwdWireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	stream := fwdStreamOf(r)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	resp.Body = &fwdWireBody{rc: resp.Body, w: w, stream: stream, sse: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	return resp, nil
}

func (w *fwdWireLog) add(stream string, data []byte) {
	var m map[string]any
	if json.Unmarshal(bytes.TrimSpace(data), &m) != nil {
		return
	}
	w.mu.Lock()
	w.msgs = append(w.msgs, m)
	w.streams = append(w.streams, stream)
	w.mu.Unlock()
}

// streamOf returns the stream the i-th message came on.
func (w *fwdWireLog) streamOf(i int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streams[i]
}

func (w *fwdWireLog) messages() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// misrouted returns the sampling and elicitation requests that did not
// arrive on the stream of the tool call they were sent for (the prompt or
// question is in the call's arguments).
func (w *fwdWireLog) misrouted(sessionStream bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i, m := range w.msgs {
		params, _ := m["params"].(map[string]any)
		var text string
		switch m["method"] {
		case "sampling/createMessage":
			msgs, _ := params["messages"].([]any)
			if len(msgs) > 0 {
				first, _ := msgs[0].(map[string]any)
				content, _ := first["content"].(map[string]any)
				text, _ = content["text"].(string)
			}
		case "elicitation/create":
			text, _ = params["message"].(string)
		default:
			continue
		}
		want, _ := json.Marshal(text)
		if sessionStream && w.streams[i] == "GET" {
			// A request of a client with several calls in flight belongs
			// to none of them: it travels on the session's own stream.
			continue
		}
		if !strings.Contains(w.streams[i], string(want)) {
			out = append(out, fmt.Sprintf("%s %q arrived on stream %q", m["method"], text, w.streams[i]))
		}
	}
	return out
}

type fwdWireBody struct {
	rc     io.ReadCloser
	w      *fwdWireLog
	stream string
	sse    bool
	buf    []byte
}

func (b *fwdWireBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.buf = append(b.buf, p[:n]...)
	if b.sse {
		for {
			i := bytes.IndexByte(b.buf, '\n')
			if i < 0 {
				break
			}
			line := bytes.TrimRight(b.buf[:i], "\r")
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				b.w.add(b.stream, d)
			}
			b.buf = b.buf[i+1:]
		}
	} else if err == io.EOF && len(b.buf) > 0 {
		b.w.add(b.stream, b.buf)
		b.buf = nil
	}
	return n, err
}

func (b *fwdWireBody) Close() error { return b.rc.Close() }

// fwdResultText is the text of a JSON-RPC response's tool result ("" when m
// is no such response).
func fwdResultText(m map[string]any) string {
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	var parts []string
	for _, c := range content {
		if cm, ok := c.(map[string]any); ok {
			if s, ok := cm["text"].(string); ok {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func fwdStrPtr(s string) *string { return &s }

// TestE2EForwardSamplingTwoClients is the acceptance test of issue #9: two
// clients of one quiver, each with its own per-client upstream session (its
// own upstream process), sample and elicit at the same time, and each gets
// only its own answers, on the streams of its own calls.
func TestE2EForwardSamplingTwoClients(t *testing.T) {
	t.Parallel()
	cfg, record := fwdConfig(t, fwdSetup{sessions: "per_client"})
	srv := startHTTP(t, "--config", cfg)
	alice := newFwdClient("alice").connectHTTP(t, srv, true)
	bob := newFwdClient("bob").connectHTTP(t, srv, true)
	alice.waitTools(t, "up__sample", "up__elicit", "up__log", "up__progress")
	bob.waitTools(t, "up__sample", "up__elicit")

	fwdRoundTrips(t, "up__", 4, alice, bob)
	if t.Failed() {
		t.Logf("quiver log:\n%s", srv.log())
	}

	// Per-client sessions over stdio: each client's calls reached its own
	// upstream process, and the two processes differ.
	pids := map[string]map[float64]bool{}
	for _, m := range fwdRecorded(t, record) {
		if m["event"] != "call" || (m["tool"] != "sample" && m["tool"] != "elicit") {
			continue
		}
		args, _ := json.Marshal(m["args"])
		for _, name := range []string{"alice", "bob"} {
			if strings.Contains(string(args), " of "+name+" ") {
				if pids[name] == nil {
					pids[name] = map[float64]bool{}
				}
				pids[name][m["pid"].(float64)] = true
			}
		}
	}
	if len(pids["alice"]) != 1 || len(pids["bob"]) != 1 {
		t.Fatalf("upstream processes per client: %v", pids)
	}
	for p := range pids["alice"] {
		if pids["bob"][p] {
			t.Fatalf("alice and bob share upstream process %v", p)
		}
	}
}

// TestE2EForwardSameClientConcurrent: one client's calls that overlap on
// its own (per-client) upstream session, each sampling or eliciting. Each
// must get its own answer, and each request should arrive on the stream of
// the call it was sent for. The answers take different times, so a request
// tied to another call's lifetime is cut short when that call ends.
func TestE2EForwardSameClientConcurrent(t *testing.T) {
	t.Parallel()
	cfg, _ := fwdConfig(t, fwdSetup{sessions: "per_client"})
	srv := startHTTP(t, "--config", cfg)
	kate := newFwdClient("kate").connectHTTP(t, srv, true)
	kate.delayOf = func(text string) time.Duration {
		var n int
		fmt.Sscanf(text[strings.LastIndexByte(text, ' ')+1:], "%d", &n)
		return time.Duration(n%4) * 100 * time.Millisecond
	}
	kate.waitTools(t, "up__sample", "up__elicit")

	const calls = 6
	var failures []string
	var wantPrompts, wantQuestions []string
	for attempt := range 3 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range calls {
			n := attempt*calls + i
			text := fmt.Sprintf("of kate call %d", n)
			tool, arg := "up__sample", "prompt"
			if i%2 == 1 {
				tool, arg = "up__elicit", "question"
			}
			text = arg + " " + text
			if arg == "prompt" {
				wantPrompts = append(wantPrompts, text)
			} else {
				wantQuestions = append(wantQuestions, text)
			}
			wg.Go(func() {
				<-start
				res, isErr, err := kate.call(context.Background(), tool, map[string]any{arg: text}, nil)
				if err == nil && arg == "prompt" {
					err = fwdCheckSample(kate, "alice", text, res, isErr)
				} else if err == nil {
					err = fwdCheckElicit(kate, "alice", text, res, isErr)
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
	}
	fwdCheckOwnPrompts(t, kate, wantPrompts, wantQuestions)
	misrouted := kate.wire.misrouted(true)
	for _, f := range failures {
		t.Log(f)
	}
	for _, m := range misrouted {
		t.Log(m)
	}
	if len(failures) > 0 || len(misrouted) > 0 {
		t.Fatalf("overlapping calls of one client: %d of %d calls failed, %d requests arrived on another call's stream\n%s", len(failures), 3*calls, len(misrouted), srv.log())
	}
}

// TestE2EForwardStdio: the basic round trip over stdio, with tool_prefix ""
// (tools listed under their upstream names) and a shared upstream session.
func TestE2EForwardStdio(t *testing.T) {
	t.Parallel()
	cfg, _ := fwdConfig(t, fwdSetup{prefix: fwdStrPtr("")})
	carol := newFwdClient("carol").connectStdio(t, true, "--config", cfg)
	carol.waitTools(t, "sample", "elicit", "progress")
	text := carol.mustCall(t, "sample", map[string]any{"prompt": "stdio prompt of carol"})
	if err := fwdCheckSample(carol, "alice", "stdio prompt of carol", text, false); err != nil {
		t.Error(err)
	}
	text = carol.mustCall(t, "elicit", map[string]any{"question": "stdio question of carol"})
	if err := fwdCheckElicit(carol, "alice", "stdio question of carol", text, false); err != nil {
		t.Error(err)
	}
	fwdCheckOwnPrompts(t, carol, []string{"stdio prompt of carol"}, []string{"stdio question of carol"})

	// Progress with the client's own token, over stdio too.
	text, isErr, err := carol.call(context.Background(), "progress", map[string]any{"steps": 2}, "carol-stdio-token")
	if err != nil || isErr || text != "done 2 steps" {
		t.Fatalf("progress: %q %v %v", text, isErr, err)
	}
	if !fwdWaitFor(5*time.Second, func() bool { _, _, p, _ := carol.seen(); return len(p) >= 2 }) {
		t.Fatal("carol received no progress over stdio")
	}
	_, _, progress, _ := carol.seen()
	for _, p := range progress {
		if p.ProgressToken != "carol-stdio-token" {
			t.Errorf("progress token %v, want carol-stdio-token", p.ProgressToken)
		}
	}
}

// TestE2EForwardSharedSessions: over one shared upstream session, calls of
// one client at a time are attributed to it; a server-to-client request
// while the calls of two clients are in flight is refused (RELAY_AMBIGUOUS)
// and reaches neither client.
func TestE2EForwardSharedSessions(t *testing.T) {
	t.Parallel()
	cfg, record := fwdConfig(t, fwdSetup{sessions: "shared"})
	srv := startHTTP(t, "--config", cfg)
	alice := newFwdClient("alice").connectHTTP(t, srv, true)
	bob := newFwdClient("bob").connectHTTP(t, srv, true)
	alice.waitTools(t, "up__sample", "up__elicit", "up__hang")

	// One client at a time: both succeed.
	var wantA, wantB [2][]string
	for r := range 2 {
		for _, c := range []*fwdClient{alice, bob} {
			other := map[string]string{"alice": "bob", "bob": "alice"}[c.name]
			prompt := fmt.Sprintf("prompt of %s round %d", c.name, r)
			question := fmt.Sprintf("question of %s round %d", c.name, r)
			if err := fwdCheckSample(c, other, prompt, c.mustCall(t, "up__sample", map[string]any{"prompt": prompt}), false); err != nil {
				t.Error(err)
			}
			if err := fwdCheckElicit(c, other, question, c.mustCall(t, "up__elicit", map[string]any{"question": question}), false); err != nil {
				t.Error(err)
			}
			w := &wantA
			if c == bob {
				w = &wantB
			}
			w[0], w[1] = append(w[0], prompt), append(w[1], question)
		}
	}
	fwdCheckOwnPrompts(t, alice, wantA[0], wantA[1])
	fwdCheckOwnPrompts(t, bob, wantB[0], wantB[1])

	// alice's hang is in flight on the shared session.
	hctx, cancelHang := context.WithCancel(context.Background())
	defer cancelHang()
	hangDone := make(chan error, 1)
	go func() {
		_, _, err := alice.call(hctx, "up__hang", nil, nil)
		hangDone <- err
	}()
	fwdWaitRecorded(t, record, "call", "hang", 1)

	// alice's own sampling is not ambiguous: all calls in flight are hers.
	prompt := "prompt of alice during her hang"
	if err := fwdCheckSample(alice, "bob", prompt, alice.mustCall(t, "up__sample", map[string]any{"prompt": prompt}), false); err != nil {
		t.Error(err)
	}
	wantA[0] = append(wantA[0], prompt)

	// bob's is: it is refused, and neither client is asked.
	text, isErr, err := bob.call(context.Background(), "up__sample", map[string]any{"prompt": "prompt of bob while alice hangs"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !isErr || !strings.Contains(text, "RELAY_AMBIGUOUS") {
		t.Errorf("bob's sample while alice's call is in flight: %q (isError %v), want RELAY_AMBIGUOUS", text, isErr)
	}
	text, isErr, err = bob.call(context.Background(), "up__elicit", map[string]any{"question": "question of bob while alice hangs"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !isErr || !strings.Contains(text, "RELAY_AMBIGUOUS") {
		t.Errorf("bob's elicit while alice's call is in flight: %q (isError %v), want RELAY_AMBIGUOUS", text, isErr)
	}
	fwdCheckOwnPrompts(t, alice, wantA[0], wantA[1])
	fwdCheckOwnPrompts(t, bob, wantB[0], wantB[1])

	cancelHang()
	select {
	case err := <-hangDone:
		if err == nil {
			t.Error("the cancelled hang returned no error")
		}
	case <-time.After(fwdTimeout):
		t.Fatal("the cancelled hang did not return")
	}
	fwdWaitRecorded(t, record, "cancelled", "hang", 1)

	// Once alice's call has ended, bob's sampling is his alone again.
	prompt = "prompt of bob after the hang"
	var last error
	if !fwdWaitFor(fwdTimeout, func() bool {
		text, isErr, err := bob.call(context.Background(), "up__sample", map[string]any{"prompt": prompt}, nil)
		if err == nil {
			err = fwdCheckSample(bob, "alice", prompt, text, isErr)
		}
		last = err
		return err == nil
	}) {
		t.Fatalf("bob's sample after alice's hang ended: %v\n%s", last, srv.log())
	}
	prompts, _, _, _ := bob.seen()
	if !slices.Contains(prompts, prompt) {
		t.Errorf("bob's handler never saw %q: %q", prompt, prompts)
	}
	for _, c := range []*fwdClient{alice, bob} {
		for _, m := range c.wire.misrouted(true) {
			t.Errorf("%s: %s", c.name, m)
		}
	}
	if t.Failed() {
		t.Logf("quiver log:\n%s", srv.log())
	}
}

// TestE2EForwardCapabilityMissing: a client that announced neither sampling
// nor elicitation is never asked; the upstream's request is refused with
// CLIENT_CAPABILITY_MISSING, which the test upstream returns as its error.
func TestE2EForwardCapabilityMissing(t *testing.T) {
	t.Parallel()
	for _, sessions := range []string{"shared", "per_client"} {
		t.Run(sessions, func(t *testing.T) {
			t.Parallel()
			cfg, _ := fwdConfig(t, fwdSetup{sessions: sessions})
			srv := startHTTP(t, "--config", cfg)
			dave := newFwdClient("dave").connectHTTP(t, srv, false)
			dave.waitTools(t, "up__sample", "up__elicit")
			for tool, args := range map[string]map[string]any{
				"up__sample": {"prompt": "prompt of dave"},
				"up__elicit": {"question": "question of dave"},
			} {
				text, isErr, err := dave.call(context.Background(), tool, args, nil)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case sessions == "shared" && (!isErr || !strings.Contains(text, "CLIENT_CAPABILITY_MISSING")):
					t.Errorf("%s without the capability: %q (isError %v), want CLIENT_CAPABILITY_MISSING", tool, text, isErr)
				case sessions == "per_client" && !isErr:
					// dave's own upstream session announces what dave
					// announced, nothing: the upstream's go-sdk refuses
					// elicitation itself, and a sampling request it sends
					// anyway is refused by quiver's upstream-side client
					// (with the go-sdk's "does not support" message, not
					// quiver's code).
					t.Errorf("%s without the capability: %q (isError %v), want an error", tool, text, isErr)
				}
				t.Logf("%s without the capability: %q", tool, text)
			}
			if prompts, questions, _, _ := dave.seen(); len(prompts)+len(questions) > 0 {
				t.Errorf("dave has no handlers, yet was asked %q %q", prompts, questions)
			}
			// A client with the handlers on the same quiver is served.
			erin := newFwdClient("erin").connectHTTP(t, srv, true)
			if err := fwdCheckSample(erin, "dave", "prompt of erin", erin.mustCall(t, "up__sample", map[string]any{"prompt": "prompt of erin"}), false); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("quiver log:\n%s", srv.log())
			}
		})
	}
}

// fwdPolicy allows listing and calling everything, sampling only for
// another server and elicitation for "up": so up's sampling is denied by
// default-deny.
const fwdPolicy = `policy_id: forward
rules:
  - id: tools
    priority: 10
    effect: allow
    match: {action: [list, call]}
  - id: sample-elsewhere
    priority: 10
    effect: allow
    match: {action: [sample], server: [other]}
  - id: elicit-up
    priority: 10
    effect: allow
    match: {action: [elicit], server: [up]}
`

// TestE2EForwardPolicy: the policy decides sample and elicit per upstream.
func TestE2EForwardPolicy(t *testing.T) {
	t.Parallel()
	cfg, _ := fwdConfig(t, fwdSetup{sessions: "per_client", policy: fwdPolicy})
	srv := startHTTP(t, "--config", cfg)
	frank := newFwdClient("frank").connectHTTP(t, srv, true)
	frank.waitTools(t, "up__sample", "up__elicit")

	text, isErr, err := frank.call(context.Background(), "up__sample", map[string]any{"prompt": "prompt of frank"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !isErr || !strings.Contains(text, "RELAY_DENIED") {
		t.Errorf("sample denied by the policy: %q (isError %v), want RELAY_DENIED", text, isErr)
	}
	question := "question of frank"
	if err := fwdCheckElicit(frank, "alice", question, frank.mustCall(t, "up__elicit", map[string]any{"question": question}), false); err != nil {
		t.Error(err)
	}
	// The denied request never reached the client.
	fwdCheckOwnPrompts(t, frank, nil, []string{question})
	if t.Failed() {
		t.Logf("quiver log:\n%s", srv.log())
	}
}

// TestE2EForwardProgressAndLogs: progress notifications reach the caller
// with its own token, log notifications reach the caller that enabled
// logging, both before the answer of the call on the call's stream, and a
// client that made no call receives nothing.
func TestE2EForwardProgressAndLogs(t *testing.T) {
	t.Parallel()
	for _, sessions := range []string{"shared", "per_client"} {
		t.Run(sessions, func(t *testing.T) {
			t.Parallel()
			cfg, _ := fwdConfig(t, fwdSetup{sessions: sessions})
			srv := startHTTP(t, "--config", cfg)
			gina := newFwdClient("gina").connectHTTP(t, srv, true)
			// hank set no level and makes no call; ivan set a level but
			// makes no call.
			hank := newFwdClient("hank").connectHTTP(t, srv, true)
			ivan := newFwdClient("ivan").connectHTTP(t, srv, true)
			gina.waitTools(t, "up__progress", "up__log")
			ctx, cancel := context.WithTimeout(context.Background(), fwdTimeout)
			defer cancel()
			for _, c := range []*fwdClient{gina, ivan} {
				if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatalf("%s: logging/setLevel: %v", c.name, err)
				}
			}

			// progress: 3 notifications with gina's token, then the
			// upstream's "progress done" log, then the answer.
			const token = "gina-token-1"
			text, isErr, err := gina.call(ctx, "up__progress", map[string]any{"steps": 3}, token)
			if err != nil || isErr || text != "done 3 steps" {
				t.Fatalf("progress: %q %v %v", text, isErr, err)
			}
			_, _, progress, logs := gina.seen()
			t.Logf("when the progress call returned, gina's handlers had %d progress and %d log notifications", len(progress), len(logs))
			msgs := gina.wire.messages()
			answer := slices.IndexFunc(msgs, func(m map[string]any) bool { return fwdResultText(m) == "done 3 steps" })
			if answer < 0 {
				t.Fatalf("the answer is not on the wire: %v", msgs)
			}
			var steps []float64
			sawLog := false
			for i, m := range msgs {
				params, _ := m["params"].(map[string]any)
				switch m["method"] {
				case "notifications/progress":
					if params["progressToken"] != token {
						t.Errorf("progress with token %v on the wire, want %q", params["progressToken"], token)
					}
					if i > answer {
						t.Errorf("progress %v after the answer", params)
					}
					if stream := gina.wire.streamOf(i); !strings.Contains(stream, `"steps":3`) {
						t.Errorf("progress %v came on stream %q, not on its call's", params, stream)
					}
					steps = append(steps, params["progress"].(float64))
				case "notifications/message":
					if params["data"] == "progress done after 3 steps" {
						sawLog = true
						if i > answer {
							t.Errorf("the progress tool's log message arrived after the answer")
						}
					}
				}
			}
			if !slices.Equal(steps, []float64{1, 2, 3}) {
				t.Errorf("progress steps on the wire before the answer: %v", steps)
			}
			if !sawLog {
				t.Errorf("the progress tool's log message never reached gina: %v", msgs)
			}

			// log: one message at warning, before the answer.
			if text := gina.mustCall(t, "up__log", map[string]any{"level": "warning", "message": "log of gina"}); text != "logged" {
				t.Fatalf("log: %q", text)
			}
			_, _, _, logs = gina.seen()
			t.Logf("when the log call returned, gina's log handler had %d messages", len(logs))
			msgs = gina.wire.messages()
			logAt := slices.IndexFunc(msgs, func(m map[string]any) bool {
				params, _ := m["params"].(map[string]any)
				return m["method"] == "notifications/message" && params["data"] == "log of gina"
			})
			answer = slices.IndexFunc(msgs, func(m map[string]any) bool { return fwdResultText(m) == "logged" })
			if logAt < 0 || answer < 0 || logAt > answer {
				t.Errorf("log message at %d, answer at %d on the wire: %v", logAt, answer, msgs)
			} else if stream := gina.wire.streamOf(logAt); !strings.Contains(stream, "log of gina") {
				t.Errorf("the log message came on stream %q, not on its call's", stream)
			}

			// gina's handlers got them all with her token (the go-sdk runs
			// notification handlers on their own goroutine, so they may
			// trail the answer a little).
			if !fwdWaitFor(5*time.Second, func() bool {
				_, _, p, l := gina.seen()
				return len(p) >= 3 && len(l) >= 2
			}) {
				_, _, p, l := gina.seen()
				t.Fatalf("gina's handlers: %d progress, %d logs", len(p), len(l))
			}
			_, _, progress, logs = gina.seen()
			for _, p := range progress {
				if p.ProgressToken != token {
					t.Errorf("gina's progress handler got token %v, want %q", p.ProgressToken, token)
				}
			}
			var data []any
			for _, l := range logs {
				data = append(data, l.Data)
			}
			if len(logs) != 2 || !slices.Contains(data, any("log of gina")) || !slices.Contains(data, any("progress done after 3 steps")) {
				t.Errorf("gina's log handler got %v", data)
			}

			// The others receive nothing, neither to their handlers nor on
			// the wire.
			time.Sleep(300 * time.Millisecond)
			for _, c := range []*fwdClient{hank, ivan} {
				prompts, questions, p, l := c.seen()
				if len(prompts)+len(questions)+len(p)+len(l) > 0 {
					t.Errorf("%s made no call but received %d prompts, %d questions, %d progress, %d logs", c.name, len(prompts), len(questions), len(p), len(l))
				}
				for _, m := range c.wire.messages() {
					// list_changed is a broadcast to every session (a
					// session may connect before the first catalog is
					// out), not something relayed from a call.
					method, _ := m["method"].(string)
					if strings.HasSuffix(method, "/list_changed") {
						continue
					}
					if strings.HasPrefix(method, "notifications/") || method == "sampling/createMessage" || method == "elicitation/create" {
						t.Errorf("%s made no call but received %v", c.name, m)
					}
				}
			}
			if t.Failed() {
				t.Logf("quiver log:\n%s", srv.log())
			}
		})
	}
}

// TestE2EForwardCancelSampling: cancelling a call cancels the sampling
// request the upstream sent for it: client -> quiver -> upstream (its tool
// ends and with it its sampling request) -> quiver -> client, whose
// handler's context ends. With timeout set the client does not cancel:
// the upstream's call_timeout ends the call, and the client's sampling
// request must end with it.
func TestE2EForwardCancelSampling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sessions string
		stdio, timeout bool
	}{
		{name: "stdio", sessions: "per_client", stdio: true},
		{name: "stdio-call_timeout", sessions: "shared", stdio: true, timeout: true},
		{name: "http-shared", sessions: "shared"},
		{name: "http-per_client", sessions: "per_client"},
		{name: "http-call_timeout", sessions: "shared", timeout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			setup := fwdSetup{sessions: tc.sessions}
			if tc.timeout {
				setup.upstream = "    call_timeout: 2s\n"
			}
			cfg, _ := fwdConfig(t, setup)
			jack := newFwdClient("jack")
			started := make(chan struct{}, 1)
			cancelled := make(chan error, 1)
			testDone := make(chan struct{})
			jack.sampleHook = func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				started <- struct{}{}
				select {
				case <-ctx.Done():
					cancelled <- ctx.Err()
					return nil, ctx.Err()
				case <-testDone:
					return nil, errors.New("never cancelled")
				}
			}
			var srv *httpServer
			if tc.stdio {
				jack.connectStdio(t, true, "--config", cfg)
			} else {
				srv = startHTTP(t, "--config", cfg)
				jack.connectHTTP(t, srv, true)
			}
			// Runs before the session's Close (cleanups run last first),
			// which would wait for a handler that is still blocked.
			t.Cleanup(func() { close(testDone) })
			jack.waitTools(t, "up__sample")
			logs := func() string {
				if srv == nil {
					return "(quiver's stderr is above)"
				}
				return srv.log()
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type outcome struct {
				text  string
				isErr bool
				err   error
			}
			done := make(chan outcome, 1)
			go func() {
				text, isErr, err := jack.call(ctx, "up__sample", map[string]any{"prompt": "prompt of jack, to be cancelled"}, nil)
				done <- outcome{text, isErr, err}
			}()
			select {
			case <-started:
			case <-time.After(fwdTimeout):
				t.Fatalf("the sampling request never reached jack\n%s", logs())
			}
			if !tc.timeout {
				cancel()
			}
			select {
			case o := <-done:
				if o.err == nil && !o.isErr {
					t.Errorf("the cancelled call succeeded: %q", o.text)
				}
				t.Logf("the call ended with %q (isError %v), err %v", o.text, o.isErr, o.err)
			case <-time.After(fwdTimeout):
				t.Fatal("the cancelled call did not return")
			}
			select {
			case err := <-cancelled:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("jack's sampling handler: %v\n%s", err, logs())
				}
			case <-time.After(5 * time.Second):
				var methods []any
				if jack.wire != nil {
					for _, m := range jack.wire.messages() {
						if m["method"] != nil {
							methods = append(methods, m["method"])
						}
					}
				}
				// Over streamable HTTP the notifications/cancelled of the
				// forwarded request travels on the stream of the client's
				// tools/call, as the request did. When the call times out
				// in quiver, quiver cancels the request and lets the
				// cancellation out before it answers the call (a
				// regression fails here). When the client cancels the call
				// itself, the go-sdk client stops reading that call's
				// stream at once, so the cancellation cannot reach it
				// there: a limitation of that client, not of the relay
				// (stdio shows the relay does its part).
				if !tc.stdio && !tc.timeout {
					t.Skipf("LIMITATION (go-sdk streamable HTTP client): a client that cancels its call stops reading the call's stream, where the cancellation of the forwarded sampling request travels; jack received only %v", methods)
				}
				t.Fatalf("jack's sampling handler was not cancelled within 5s; jack received %v\n%s", methods, logs())
			}
			// The session still works afterwards.
			jack.sampleHook = nil
			if err := fwdCheckSample(jack, "alice", "prompt of jack", jack.mustCall(t, "up__sample", map[string]any{"prompt": "prompt of jack"}), false); err != nil {
				t.Error(err)
			}
		})
	}
}
