package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
)

// An upstream that declares the tasks extension (io.modelcontextprotocol/
// tasks, SEP-2663) may answer a tools/call whose request declares it too
// with a task instead of a result: resultType "task" and a Task. The
// go-sdk's CallToolResult keeps neither, so the connection rewrites such an
// answer into a result the SDK keeps whole: an empty result whose _meta
// holds the task under a key of this client's, random, that no upstream
// can know (TaskOf reads it back). The task's methods (tasks/get,
// tasks/update, tasks/cancel) are custom methods of the go-sdk client.

// TasksExtension is the tasks extension's identifier.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Task is an upstream's task: a CreateTaskResult or a tasks/get result
// (a DetailedTask), as the extension's schema has it.
type Task struct {
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs *int64              `json:"pollIntervalMs,omitempty"`
	InputRequests  mcp.InputRequestMap `json:"inputRequests,omitempty"`
	Result         json.RawMessage     `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

// The statuses of a task.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskResult is the result of tasks/get, and the acknowledgement of
// tasks/update and tasks/cancel (no task then).
type TaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType,omitempty"`
	*Task
}

// TaskParams are the params of tasks/get, tasks/update and tasks/cancel.
type TaskParams struct {
	mcp.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses mcp.InputResponseMap `json:"inputResponses,omitempty"`
}

// taskMethods are the methods of the extension a client sends.
var taskMethods = []string{"tasks/get", "tasks/update", "tasks/cancel"}

// addTaskMethods registers the extension's methods on mc.
func addTaskMethods(mc *mcp.Client) error {
	for _, m := range taskMethods {
		if err := mcp.AddSendingCustomMethod[*TaskParams, *TaskResult](mc, m); err != nil {
			return err
		}
	}
	return nil
}

// newTaskKey returns the _meta key under which a connection hands over a
// task answer.
func newTaskKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "dev.quiver-mcp/task-" + hex.EncodeToString(b[:])
}

// OffersTasks reports whether the upstream declared the tasks extension
// and quiver can relay its tasks: over stdio and streamable HTTP, not
// over the legacy SSE transport (whose answers come on a stream shared by
// every call), where calls stay synchronous.
func (c *Client) OffersTasks() bool {
	if c.spec.SSE != "" {
		return false
	}
	res := c.InitializeResult()
	if res == nil || res.Capabilities == nil {
		return false
	}
	_, ok := res.Capabilities.Extensions[TasksExtension]
	return ok
}

// ErrTaskMalformed: the upstream's task answer does not follow the
// extension's schema.
var ErrTaskMalformed = errors.New("malformed task")

// TaskOf returns the task an upstream answered a tools/call with, and
// whether it answered with one.
func (c *Client) TaskOf(res *mcp.CallToolResult) (*Task, bool, error) {
	if res == nil || res.Meta == nil {
		return nil, false, nil
	}
	raw, ok := res.Meta[c.taskKey]
	if !ok {
		return nil, false, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %w", ErrTaskMalformed, err)
	}
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, true, fmt.Errorf("%w: %w", ErrTaskMalformed, err)
	}
	// A CreateTaskResult is a Task: the fields of a status (result,
	// error, input requests) come with tasks/get only.
	return &t, true, t.checkBase()
}

// parseTask reads a task and checks what the schema requires of it.
func parseTask(b []byte) (*Task, error) {
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTaskMalformed, err)
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	return &t, nil
}

// checkBase checks what every Task carries.
func (t *Task) checkBase() error {
	switch {
	case t.TaskID == "":
		return fmt.Errorf("%w: no taskId", ErrTaskMalformed)
	case t.CreatedAt == "" || t.LastUpdatedAt == "":
		return fmt.Errorf("%w: no createdAt or lastUpdatedAt", ErrTaskMalformed)
	}
	switch t.Status {
	case TaskWorking, TaskCancelled, TaskInputRequired, TaskCompleted, TaskFailed:
		return nil
	}
	return fmt.Errorf("%w: status %q", ErrTaskMalformed, t.Status)
}

// check checks a DetailedTask (a tasks/get result): its status's fields
// too.
func (t *Task) check() error {
	if err := t.checkBase(); err != nil {
		return err
	}
	switch t.Status {
	case TaskWorking, TaskCancelled:
	case TaskInputRequired:
		if len(t.InputRequests) == 0 {
			return fmt.Errorf("%w: input_required without inputRequests", ErrTaskMalformed)
		}
	case TaskCompleted:
		if len(t.Result) == 0 {
			return fmt.Errorf("%w: completed without a result", ErrTaskMalformed)
		}
	case TaskFailed:
		if t.Error == nil {
			return fmt.Errorf("%w: failed without an error", ErrTaskMalformed)
		}
	default:
		return fmt.Errorf("%w: status %q", ErrTaskMalformed, t.Status)
	}
	return nil
}

// taskCall sends one of the extension's methods for the task id with
// caps, the client capabilities the request declares (the extension's
// among them, or the upstream refuses it).
func (c *Client) taskCall(ctx context.Context, method, id string, caps any, answers mcp.InputResponseMap) (*TaskResult, error) {
	return do(c, ctx, method, func(ctx context.Context, cs *mcp.ClientSession) (*TaskResult, error) {
		p := &TaskParams{TaskID: id, InputResponses: answers}
		p.Meta = mcp.Meta{mcp.MetaKeyClientCapabilities: caps}
		return mcp.CallCustomMethod[*TaskParams, *TaskResult](ctx, cs, method, p)
	})
}

// GetTask polls the upstream's task id (tasks/get).
func (c *Client) GetTask(ctx context.Context, id string, caps any) (*Task, error) {
	res, err := c.taskCall(ctx, "tasks/get", id, caps, nil)
	if err != nil {
		return nil, err
	}
	if res.Task == nil {
		return nil, newError(codes.UpstreamError, fmt.Errorf("upstream %q: tasks/get: %w: no task", c.spec.Name, ErrTaskMalformed))
	}
	if err := res.Task.check(); err != nil {
		return nil, newError(codes.UpstreamError, fmt.Errorf("upstream %q: tasks/get: %w", c.spec.Name, err))
	}
	return res.Task, nil
}

// UpdateTask answers the input requests of the upstream's task id
// (tasks/update).
func (c *Client) UpdateTask(ctx context.Context, id string, caps any, answers mcp.InputResponseMap) error {
	_, err := c.taskCall(ctx, "tasks/update", id, caps, answers)
	return err
}

// CancelTask cancels the upstream's task id (tasks/cancel).
func (c *Client) CancelTask(ctx context.Context, id string, caps any) error {
	_, err := c.taskCall(ctx, "tasks/cancel", id, caps, nil)
	return err
}

// taskConn rewrites an answer with resultType "task" (see above) read from
// a stdio connection.
type taskConn struct {
	mcp.Connection
	key string
}

// Read implements mcp.Connection.
func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Response); ok && err == nil && r.Error == nil {
		if b, ok := taskAnswer(r.Result, c.key); ok {
			r.Result = b
		}
	}
	return msg, err
}

// taskAnswer returns result rewritten under key when it is a task answer.
func taskAnswer(result json.RawMessage, key string) (json.RawMessage, bool) {
	if !bytes.Contains(result, []byte(`"task"`)) {
		return nil, false
	}
	var head struct {
		ResultType string `json:"resultType"`
	}
	if json.Unmarshal(result, &head) != nil || head.ResultType != "task" {
		return nil, false
	}
	b, err := json.Marshal(map[string]any{"content": []any{}, "_meta": map[string]json.RawMessage{key: result}})
	return b, err == nil
}

// taskMessage rewrites a JSON-RPC response message whose result is a
// task answer, and reports whether it did.
func taskMessage(b []byte, key string) ([]byte, bool) {
	if !bytes.Contains(b, []byte(`"task"`)) {
		return b, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b, false
	}
	res, ok := taskAnswer(m["result"], key)
	if !ok {
		return b, false
	}
	m["result"] = res
	out, err := json.Marshal(m)
	if err != nil {
		return b, false
	}
	return out, true
}

// Over streamable HTTP the go-sdk's connection cannot be wrapped (it has
// unexported methods); the answer to a tools/call POST is rewritten in its
// HTTP response instead, a JSON body whole, an event stream line by line.

// taskBody returns resp's body rewriting task answers under key.
func taskBody(resp *http.Response, key string) io.ReadCloser {
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/json"):
		return &jsonTaskBody{ReadCloser: resp.Body, key: key}
	case strings.HasPrefix(ct, "text/event-stream"):
		return &sseTaskBody{ReadCloser: resp.Body, r: bufio.NewReader(resp.Body), key: key}
	}
	return resp.Body
}

// jsonTaskBody is a JSON response body, read whole on first use (as the
// go-sdk reads it).
type jsonTaskBody struct {
	io.ReadCloser
	key  string
	body *bytes.Reader
}

// Read implements io.Reader.
func (b *jsonTaskBody) Read(p []byte) (int, error) {
	if b.body == nil {
		all, err := io.ReadAll(b.ReadCloser)
		if err != nil {
			return 0, err
		}
		out, _ := taskMessage(all, b.key)
		b.body = bytes.NewReader(out)
	}
	return b.body.Read(p)
}

// sseTaskBody is an event stream whose data lines are rewritten.
type sseTaskBody struct {
	io.ReadCloser
	r       *bufio.Reader
	key     string
	pending []byte
	err     error
}

// Read implements io.Reader.
func (b *sseTaskBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		line, err := b.r.ReadBytes('\n')
		b.err = err
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			trimmed := bytes.TrimRight(data, "\r\n")
			if out, changed := taskMessage(bytes.TrimPrefix(trimmed, []byte(" ")), b.key); changed {
				line = slices.Concat([]byte("data: "), out, data[len(trimmed):])
			}
		}
		b.pending = line
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// maxTaskBody bounds the body taskName reads.
const maxTaskBody = 64 << 10

// taskName returns the Mcp-Name header of a tasks/* request over
// streamable HTTP: its taskId, as the extension requires ("" for any other
// request, or one without a readable taskId).
func taskName(req *http.Request) string {
	if !strings.HasPrefix(req.Header.Get("Mcp-Method"), "tasks/") || req.Header.Get("Mcp-Name") != "" || req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxTaskBody))
	if err != nil {
		return ""
	}
	var m struct {
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.Params.TaskID
}
