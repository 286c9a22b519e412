package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixedConn reads one message.
type fixedConn struct {
	mcp.Connection
	msg jsonrpc.Message
}

func (c fixedConn) Read(context.Context) (jsonrpc.Message, error) { return c.msg, nil }

func TestTaskConn(t *testing.T) {
	const key = "dev.quiver-mcp/task-test"
	c := &Client{taskKey: key}
	created := `{"resultType":"task","taskId":"t1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":5000}`
	for _, tc := range []struct {
		name, result string
		task         bool
		wantErr      error
	}{
		{"task", created, true, nil},
		{"complete", `{"resultType":"complete","content":[{"type":"text","text":"task"}]}`, false, nil},
		{"text mentions task", `{"content":[{"type":"text","text":"\"task\""}]}`, false, nil},
		{"forged key", `{"content":[],"_meta":{"dev.quiver-mcp/task-other":{"taskId":"x"}}}`, false, nil},
		{"malformed task", `{"resultType":"task","taskId":"t1","status":"sleeping"}`, true, ErrTaskMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &taskConn{Connection: fixedConn{msg: &jsonrpc.Response{Result: json.RawMessage(tc.result)}}, key: key}
			msg, err := conn.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(msg.(*jsonrpc.Response).Result, &res); err != nil {
				t.Fatal(err)
			}
			task, ok, err := c.TaskOf(&res)
			if ok != tc.task || !errors.Is(err, tc.wantErr) {
				t.Fatalf("TaskOf = %v, %v, %v; want task %v, error %v", task, ok, err, tc.task, tc.wantErr)
			}
			if ok && err == nil && (task.TaskID != "t1" || task.Status != TaskWorking || *task.PollIntervalMs != 5000) {
				t.Fatalf("task = %+v", task)
			}
		})
	}
}

func TestParseTask(t *testing.T) {
	base := `"taskId":"t","createdAt":"a","lastUpdatedAt":"b","ttlMs":null`
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"working", `{` + base + `,"status":"working"}`, true},
		{"cancelled", `{` + base + `,"status":"cancelled"}`, true},
		{"completed", `{` + base + `,"status":"completed","result":{"content":[]}}`, true},
		{"completed without result", `{` + base + `,"status":"completed"}`, false},
		{"failed", `{` + base + `,"status":"failed","error":{"code":-32603,"message":"x"}}`, true},
		{"failed without error", `{` + base + `,"status":"failed"}`, false},
		{"input_required", `{` + base + `,"status":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object"}}}}}`, true},
		{"input_required without requests", `{` + base + `,"status":"input_required"}`, false},
		{"unknown status", `{` + base + `,"status":"done"}`, false},
		{"no id", `{"createdAt":"a","lastUpdatedAt":"b","status":"working"}`, false},
		{"not an object", `[]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTask([]byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("parseTask = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func FuzzParseTask(f *testing.F) {
	f.Add([]byte(`{"taskId":"t","createdAt":"a","lastUpdatedAt":"b","ttlMs":null,"status":"working"}`))
	f.Add([]byte(`{"taskId":"t","createdAt":"a","lastUpdatedAt":"b","status":"input_required","inputRequests":{"q":{"method":"roots/list"}}}`))
	f.Add([]byte(`{"resultType":"task"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := parseTask(b)
		if err == nil && (task.TaskID == "" || task.check() != nil) {
			t.Fatalf("accepted %q", b)
		}
		// The connection's rewrite takes any answer.
		conn := &taskConn{Connection: fixedConn{msg: &jsonrpc.Response{Result: b}}, key: "k"}
		if _, err := conn.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTaskBody(t *testing.T) {
	const key = "k"
	task := `{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","taskId":"t1","status":"working","createdAt":"a","lastUpdatedAt":"b","ttlMs":null}}`
	plain := `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"\"task\""}]}}`
	for _, tc := range []struct {
		name, ct, body string
		tasks          int
	}{
		{"json task", "application/json", task, 1},
		{"json result", "application/json", plain, 0},
		{"sse", "text/event-stream", "event: message\nid: 1\ndata: " + plain + "\n\nevent: message\ndata: " + task + "\r\n\r\n", 1},
		{"sse without final newline", "text/event-stream", "data: " + task, 1},
		{"other", "text/plain", task, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{Header: http.Header{"Content-Type": {tc.ct}}, Body: io.NopCloser(strings.NewReader(tc.body))}
			b, err := io.ReadAll(taskBody(resp, key))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Count(string(b), `"_meta":{"k":{"resultType":"task"`)
			if got != tc.tasks {
				t.Fatalf("%d tasks handed over, want %d: %s", got, tc.tasks, b)
			}
			if tc.tasks == 0 && string(b) != tc.body {
				t.Fatalf("body changed: %s", b)
			}
			if tc.ct == "text/event-stream" && strings.Count(string(b), "\n") != strings.Count(tc.body, "\n") {
				t.Fatalf("lines changed: %q", b)
			}
		})
	}
}

func FuzzTaskBody(f *testing.F) {
	f.Add("data: {\"result\":{\"resultType\":\"task\"}}\n\n")
	f.Add("data:{\"result\":{\"resultType\":\"task\",\"taskId\":\"x\"}}\r\n")
	f.Fuzz(func(t *testing.T, body string) {
		resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
		b, err := io.ReadAll(taskBody(resp, "k"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body, `"task"`) && string(b) != body {
			t.Fatalf("body without a task changed: %q -> %q", body, b)
		}
	})
}
