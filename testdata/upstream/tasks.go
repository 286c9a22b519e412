package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// With -tasks the server declares the tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663) and answers the tools below with
// a task when the request declares the extension. The e2e tests' tools move
// one step per tasks/get, never by the clock, so tests need no timing:
//
//   - report {size}: working, then completed with a text of size bytes;
//   - ask_task {question}: working, then input_required (an elicitation
//     keyed "q1"), then, after tasks/update answers q1, completed;
//   - forever: working until tasks/cancel;
//   - brief: like report, with ttlMs 1.
//
// The others are the fixtures the conformance suite's tasks-* scenarios
// call (greet, slow_compute, failing_job, protocol_error_job,
// confirm_delete, multi_input, test_tool_with_task). Every tasks/* request
// is recorded (event "task").

const tasksExt = "io.modelcontextprotocol/tasks"

// wireTask is a task on the wire (CreateTaskResult, GetTaskResult).
type wireTask struct {
	mcp.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId,omitempty"`
	Status         string              `json:"status,omitempty"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt,omitempty"`
	LastUpdatedAt  string              `json:"lastUpdatedAt,omitempty"`
	TTLMs          *int64              `json:"ttlMs,omitempty"`
	PollIntervalMs *int64              `json:"pollIntervalMs,omitempty"`
	InputRequests  mcp.InputRequestMap `json:"inputRequests,omitempty"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

type taskParams struct {
	mcp.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses mcp.InputResponseMap `json:"inputResponses,omitempty"`
}

type task struct {
	tool, arg string
	size      int
	status    string
	step      int
	created   time.Time
	updated   time.Time
	due       time.Time
	ttl       int64
	// pending are the input requests outstanding; answers those
	// answered.
	pending mcp.InputRequestMap
	answers map[string]*mcp.ElicitResult
	result  *mcp.CallToolResult
	failure *jsonrpc.Error
}

// taskStore holds the tasks of one server process.
type taskStore struct {
	mu    sync.Mutex
	tasks map[string]*task
}

const maxTasks = 1024

// taskTools are the tools answered with a task when the request declares
// the extension; required ones refuse a request that does not.
var taskTools = map[string]bool{"report": false, "brief": false, "ask_task": false, "forever": false,
	"slow_compute": false, "failing_job": true, "protocol_error_job": false, "confirm_delete": false,
	"multi_input": false, "test_tool_with_task": true}

func elicit(message string, props map[string]any) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message, RequestedSchema: map[string]any{"type": "object", "properties": props}}
}

func (a *app) addTasks() {
	a.tasks = &taskStore{tasks: map[string]*task{}}
	s := a.server
	needsTasks := func(context.Context, *mcp.CallToolRequest, emptyIn) (*mcp.CallToolResult, any, error) {
		return errorResult("this tool needs the tasks extension"), nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "report", Description: "Write a report of size bytes (as a task where the client allows)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Size int `json:"size"`
		}) (*mcp.CallToolResult, any, error) {
			return textResult(report(in.Size)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "brief", Description: "A one-line report whose task lives 1 ms."},
		func(context.Context, *mcp.CallToolRequest, emptyIn) (*mcp.CallToolResult, any, error) {
			return textResult(report(16)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask_task", Description: "Ask the user a question during a task."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct {
			Question string `json:"question"`
		}) (*mcp.CallToolResult, any, error) {
			return errorResult("ask_task needs the tasks extension"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "forever", Description: "Work until cancelled."}, needsTasks)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greet someone (never a task)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			return textResult("Hello, " + in.Name + "!"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow_compute", Description: "Compute for seconds seconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			t := time.NewTimer(time.Duration(min(max(in.Seconds, 0), 60)) * time.Second)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return textResult("computed " + in.Label), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "failing_job", Description: "A job that fails (task required)."}, needsTasks)
	mcp.AddTool(s, &mcp.Tool{Name: "protocol_error_job", Description: "A job that fails with a protocol error."},
		func(context.Context, *mcp.CallToolRequest, emptyIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal failure"}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "confirm_delete", Description: "Delete a file after the user confirms (as a task)."},
		func(context.Context, *mcp.CallToolRequest, struct {
			Filename string `json:"filename"`
		}) (*mcp.CallToolResult, any, error) {
			return errorResult("confirm_delete needs the tasks extension"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "multi_input", Description: "Ask two questions at once (as a task)."}, needsTasks)
	mcp.AddTool(s, &mcp.Tool{Name: "test_tool_with_task", Description: "Ask for a name the multi-round-trip way, then finish as a task."},
		func(_ context.Context, req *mcp.CallToolRequest, _ emptyIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": elicit("Your name?",
				map[string]any{"name": map[string]any{"type": "string"}})}}, nil, nil
		})
	s.AddReceivingMiddleware(a.taskMiddleware)
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if err := mcp.AddReceivingCustomMethod(s, m, func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*wireTask, error) {
			return a.taskMethod(m, p)
		}); err != nil {
			panic(err)
		}
	}
}

type slowIn struct {
	Seconds float64 `json:"seconds"`
	Label   string  `json:"label"`
}

func report(size int) string {
	size = max(1, min(size, 1<<20))
	// Lines of words: a tokenizer's worst case (one long run of a single
	// character) is not what a report looks like.
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "line %d of the report: all quiet\n", i)
	}
	return b.String()[:size]
}

// declaresTasks reports whether a request declares the extension.
func declaresTasks(req mcp.Request) bool {
	v, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	})
	if !ok {
		return false
	}
	caps := v.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok = caps.Extensions[tasksExt]
	return ok
}

// missingTasks is the spec's refusal of a request that needs the extension.
func missingTasks() error {
	return &jsonrpc.Error{Code: -32021, Message: "Missing required client capability",
		Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExt + `":{}}}}`)}
}

// taskMiddleware answers the task tools' calls with a task when the
// request declares the extension.
func (a *app) taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "tasks/") {
			a.record(map[string]any{"event": "task", "method": method, "declared": declaresTasks(req)})
			if !declaresTasks(req) {
				return nil, missingTasks()
			}
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if method != "tools/call" || !ok {
			return next(ctx, method, req)
		}
		required, isTask := taskTools[p.Name]
		if !isTask {
			return next(ctx, method, req)
		}
		if !declaresTasks(req) {
			if required {
				return nil, missingTasks()
			}
			return next(ctx, method, req)
		}
		now := time.Now().UTC()
		t := &task{tool: p.Name, ttl: 60000, status: "working", created: now, updated: now}
		switch p.Name {
		case "report":
			var in struct {
				Size int `json:"size"`
			}
			_ = json.Unmarshal(p.Arguments, &in)
			t.size = in.Size
		case "brief":
			t.tool, t.size, t.ttl = "report", 16, 1
		case "ask_task", "confirm_delete":
			var in struct {
				Question string `json:"question"`
				Filename string `json:"filename"`
			}
			_ = json.Unmarshal(p.Arguments, &in)
			t.arg = in.Question + in.Filename
		case "slow_compute":
			var in slowIn
			_ = json.Unmarshal(p.Arguments, &in)
			t.arg, t.due = in.Label, now.Add(time.Duration(in.Seconds*float64(time.Second)))
		case "test_tool_with_task":
			// The name is gathered the multi-round-trip way first.
			r, ok := p.InputResponses["user_name"].(*mcp.ElicitResult)
			if !ok {
				return next(ctx, method, req)
			}
			name, _ := r.Content["name"].(string)
			t.status, t.result = "completed", textResult("Hello, "+name+"!")
		}
		id, err := a.tasks.add(t)
		if err != nil {
			return nil, err
		}
		out := t.wire(id)
		out.ResultType = "task"
		out.InputRequests, out.Result, out.Error = nil, nil, nil
		return out, nil
	}
}

func (s *taskStore) add(t *task) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tasks) >= maxTasks {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "too many tasks"}
	}
	s.tasks[id] = t
	return id, nil
}

func (t *task) wire(id string) *wireTask {
	poll := int64(10)
	ttl := t.ttl
	w := &wireTask{ResultType: "complete", TaskID: id, Status: t.status, CreatedAt: t.created.Format(time.RFC3339Nano),
		LastUpdatedAt: t.updated.Format(time.RFC3339Nano), TTLMs: &ttl, PollIntervalMs: &poll}
	switch t.status {
	case "input_required":
		w.InputRequests = t.pending
	case "completed":
		w.Result = t.result
	case "failed":
		w.Error = t.failure
	}
	return w
}

// advance moves a working task one step (on tasks/get).
func (t *task) advance(now time.Time) {
	if t.status != "working" {
		return
	}
	t.step++
	switch t.tool {
	case "report":
		if t.step >= 2 {
			t.status, t.result = "completed", textResult(report(t.size))
		}
	case "ask_task":
		if t.step >= 2 {
			t.status, t.pending = "input_required", mcp.InputRequestMap{"q1": elicit(t.arg,
				map[string]any{"answer": map[string]any{"type": "string"}})}
		}
	case "slow_compute":
		if !now.Before(t.due) {
			t.status, t.result = "completed", textResult("computed "+t.arg)
		}
	case "failing_job":
		t.status, t.result = "completed", errorResult("the job failed")
	case "protocol_error_job":
		t.status, t.failure = "failed", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal failure"}
	case "confirm_delete":
		t.status, t.pending = "input_required", mcp.InputRequestMap{"confirm": elicit("Delete "+t.arg+"?",
			map[string]any{"confirm": map[string]any{"type": "boolean"}})}
	case "multi_input":
		t.status, t.pending = "input_required", mcp.InputRequestMap{
			"first":  elicit("First?", map[string]any{"name": map[string]any{"type": "string"}}),
			"second": elicit("Second?", map[string]any{"name": map[string]any{"type": "string"}})}
	}
	t.updated = now
}

// answer records the answers to pending input requests, and completes the
// task once none is pending.
func (t *task) answer(responses mcp.InputResponseMap, now time.Time) {
	if t.status != "input_required" {
		return
	}
	for k, v := range responses {
		r, ok := v.(*mcp.ElicitResult)
		if _, pending := t.pending[k]; !ok || !pending {
			continue
		}
		if t.answers == nil {
			t.answers = map[string]*mcp.ElicitResult{}
		}
		t.answers[k] = r
		delete(t.pending, k)
	}
	t.updated = now
	if len(t.pending) > 0 {
		return
	}
	t.status = "completed"
	switch t.tool {
	case "ask_task":
		r := t.answers["q1"]
		t.result = textResult(fmt.Sprintf("asked: %s %v", r.Action, r.Content))
	case "confirm_delete":
		t.result = textResult(fmt.Sprintf("%s %s: %v", t.arg, t.answers["confirm"].Action, t.answers["confirm"].Content))
	default:
		t.result = textResult(fmt.Sprintf("answered %d questions", len(t.answers)))
	}
}

// taskMethod serves tasks/get, tasks/update and tasks/cancel.
func (a *app) taskMethod(method string, p *taskParams) (*wireTask, error) {
	s := a.tasks
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[p.TaskID]
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
	}
	now := time.Now().UTC()
	switch method {
	case "tasks/cancel":
		if t.status == "working" || t.status == "input_required" {
			t.status, t.updated, t.pending = "cancelled", now, nil
		}
		return &wireTask{ResultType: "complete"}, nil
	case "tasks/update":
		t.answer(p.InputResponses, now)
		return &wireTask{ResultType: "complete"}, nil
	}
	t.advance(now)
	return t.wire(p.TaskID), nil
}
