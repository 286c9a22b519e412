package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// syncBuffer is a receipts copy safe for the writer's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// receiptsOf flushes rt's receipts and decodes the copy.
func receiptsOf(t *testing.T, rt *Runtime, buf *syncBuffer) []receipts.Receipt {
	t.Helper()
	if err := rt.rec.out.Flush(); err != nil {
		t.Fatal(err)
	}
	buf.mu.Lock()
	defer buf.mu.Unlock()
	var out []receipts.Receipt
	sc := bufio.NewScanner(bytes.NewReader(buf.b.Bytes()))
	for sc.Scan() {
		var r receipts.Receipt
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("receipt %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// startRecorded starts a proxy-mode runtime whose receipts are copied to
// the returned buffer; it is closed when the test ends.
func startRecorded(t *testing.T) (*Runtime, *syncBuffer, context.Context) {
	t.Helper()
	buf := &syncBuffer{}
	rg := setup(t, config.ModeProxy, staticFleet(t), func(r *rig) { r.deps.ReceiptsCopy = buf })
	rt, ctx := startOnly(t, rg)
	return rt, buf, ctx
}

// wantReceipt is what one request's receipt must say.
type wantReceipt struct {
	method, result, code string
}

func checkReceipts(t *testing.T, got []receipts.Receipt, want []wantReceipt) {
	t.Helper()
	var lines []string
	for _, r := range got {
		lines = append(lines, r.MCP.Method+" "+r.Decision.Result+" "+r.Outcome.ErrorCode)
	}
	if len(got) != len(want) {
		t.Fatalf("%d receipts, want %d:\n%s", len(got), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		r := got[i]
		if r.MCP.Method != w.method || r.Decision.Result != w.result || r.Outcome.ErrorCode != w.code {
			t.Errorf("receipt %d = %q, want %q", i, lines[i], w.method+" "+w.result+" "+w.code)
		}
	}
}

// Over stdio every call gets exactly one receipt: the ones the go-sdk
// refuses before dispatch (before initialize, an unknown method,
// parameters that do not decode) as well as initialize, ping, listings
// and tool calls, known or not. Notifications get none.
func TestOneReceiptPerRequestStdio(t *testing.T) {
	rt, buf, ctx := startRecorded(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- rt.serveTransport(ctx, &mcp.IOTransport{Reader: inR, Writer: outW}) }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// answer reads until the answer to id, skipping notifications.
	answer := func(id int) map[string]any {
		t.Helper()
		for lines.Scan() {
			var m map[string]any
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("%q: %v", lines.Text(), err)
			}
			if v, ok := m["id"].(float64); ok && int(v) == id {
				return m
			}
		}
		t.Fatalf("no answer to %d: %v", id, lines.Err())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if a := answer(1); a["error"] == nil {
		t.Fatalf("tools/list before initialize answered %v", a)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	answer(2)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	answer(3)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	answer(4)
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
	if a := answer(5); a["error"] == nil {
		t.Fatalf("unknown tool answered %v", a)
	}
	send(`{"jsonrpc":"2.0","id":6,"method":"foo/bar","params":{}}`)
	if a := answer(6); a["error"] == nil {
		t.Fatalf("unknown method answered %v", a)
	}
	send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tool_hydrate","arguments":{"nope":1}}}`)
	if a := answer(7); a["result"] == nil {
		t.Fatalf("bad arguments answered %v", a)
	}
	send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":5}`)
	if a := answer(8); a["error"] == nil {
		t.Fatalf("undecodable params answered %v", a)
	}
	inW.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
	got := receiptsOf(t, rt, buf)
	checkReceipts(t, got, []wantReceipt{
		{"tools/list", "deny", CodeProtocolError},
		{"initialize", "allow", ""},
		{"ping", "allow", ""},
		{"tools/list", "allow", ""},
		{"tools/call", "deny", CodeInvalidParams},
		{"foo/bar", "deny", CodeMethodNotFound},
		{"tools/call:tool_hydrate", "deny", CodeArgsInvalid},
		{"tools/call", "deny", CodeInvalidParams},
	})
	for _, r := range got {
		if r.Principal.Sub == "" {
			t.Errorf("%s: a stdio receipt names no principal", r.MCP.Method)
		}
	}
}

// Over HTTP too: the listener's refusals (unknown session, a forbidden
// host, a GET without a session, an unknown method) get one receipt each,
// and a request the middleware saw is never receipted twice.
func TestOneReceiptPerRequestHTTP(t *testing.T) {
	rt, buf, ctx := startRecorded(t)
	srv := httptest.NewServer(rt.Handler("/mcp"))
	defer srv.Close()
	session := ""
	post := func(body string, mod func(*http.Request)) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		// A client cannot pass its own tag.
		req.Header.Set(tagHeader, "1")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		if mod != nil {
			mod(req)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil); code != 200 || session == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	if code, _ := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); code != http.StatusAccepted {
		t.Fatalf("initialized: %d", code)
	}
	if code, body := post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil); code != 200 {
		t.Fatalf("ping: %d %s", code, body)
	}
	if code, body := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`, nil); code != 200 || !strings.Contains(body, `"error"`) {
		t.Fatalf("unknown tool: %d %s", code, body)
	}
	if code, _ := post(`{"jsonrpc":"2.0","id":4,"method":"foo/bar","params":{}}`, nil); code < 400 {
		t.Fatalf("unknown method: %d", code)
	}
	if code, _ := post(`{"jsonrpc":"2.0","id":5,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Mcp-Session-Id", "no-such-session") }); code != http.StatusNotFound {
		t.Fatalf("unknown session: %d", code)
	}
	if code, _ := post(`{"jsonrpc":"2.0","id":6,"method":"ping"}`, func(r *http.Request) { r.Host = "evil.example:80" }); code != http.StatusForbidden {
		t.Fatalf("foreign host: %d", code)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("GET without a session: %d", resp.StatusCode)
	}
	got := receiptsOf(t, rt, buf)
	checkReceipts(t, got, []wantReceipt{
		{"initialize", "allow", ""},
		{"ping", "allow", ""},
		{"tools/call", "deny", CodeInvalidParams},
		{"foo/bar", "deny", CodeProtocolError},
		{"ping", "deny", CodeSessionNotFound},
		{"ping", "deny", CodeForbidden},
		{"http", "deny", CodeProtocolError},
	})
	for _, r := range got[:3] {
		if r.MCP.SessionID != session {
			t.Errorf("%s: session %q, want %q", r.MCP.Method, r.MCP.SessionID, session)
		}
	}
}

// The catchers read the head of a refused request's body (outside input)
// and of its answer: whatever they hold, the receipt names a bounded,
// well-formed method and a one-line message, and nothing panics.
func FuzzRefusalReceipt(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"foo/bar"}`,
		`{"method": "tools/call", "params": {}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`,
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602}}\n\n",
		`{"method":"` + strings.Repeat("a", 200) + `"}`,
		"{\"method\":\"x\u2028y\"}",
	} {
		f.Add([]byte(s), 400)
	}
	f.Fuzz(func(t *testing.T, head []byte, status int) {
		if len(head) > 1024 {
			head = head[:1024]
		}
		m := receiptMethod(methodIn(head, http.MethodPost))
		if m != "http" && m != "invalid" && !methodShape.MatchString(m) {
			t.Fatalf("method %q", m)
		}
		w := &capturingWriter{ResponseWriter: httptest.NewRecorder(), status: status}
		w.n = copy(w.head[:], head)
		if e := w.refusal(); e != nil {
			if e.Code == "" || strings.ContainsAny(e.Message, "\n\r") || len(e.Message) > maxMessage {
				t.Fatalf("refusal %+v", e)
			}
		}
	})
}
