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
// a task when the request declares the extension (synchronously when it
// does not). Every task moves one step per tasks/get, never by the clock,
// so tests need no timing:
//
//   - report {size}: working, then completed with a text of size bytes;
//   - ask_task {question}: working, then input_required (an elicitation
//     keyed "q1"), then, after tasks/update answers q1, completed;
//   - forever: working until tasks/cancel;
//   - brief: like report, with ttlMs 1.
//
// Every tasks/* request is recorded (event "task").

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
	ttl       int64
	result    *mcp.CallToolResult
}

// taskStore holds the tasks of one server process.
type taskStore struct {
	mu    sync.Mutex
	tasks map[string]*task
}

const maxTasks = 1024

func (a *app) addTasks() {
	a.tasks = &taskStore{tasks: map[string]*task{}}
	s := a.server
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
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Question string `json:"question"`
		}) (*mcp.CallToolResult, any, error) {
			return errorResult("ask_task needs the tasks extension"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "forever", Description: "Work until cancelled."},
		func(context.Context, *mcp.CallToolRequest, emptyIn) (*mcp.CallToolResult, any, error) {
			return errorResult("forever needs the tasks extension"), nil, nil
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

// taskMiddleware answers the task tools' calls with a task when the
// request declares the extension.
func (a *app) taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "tasks/") {
			a.record(map[string]any{"event": "task", "method": method, "declared": declaresTasks(req)})
			if !declaresTasks(req) {
				return nil, &jsonrpc.Error{Code: -32021, Message: "Missing required client capability"}
			}
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if method != "tools/call" || !ok || !declaresTasks(req) {
			return next(ctx, method, req)
		}
		var t *task
		now := time.Now().UTC()
		switch p.Name {
		case "report":
			var in struct {
				Size int `json:"size"`
			}
			_ = json.Unmarshal(p.Arguments, &in)
			t = &task{tool: "report", size: in.Size, ttl: 60000}
		case "brief":
			t = &task{tool: "report", size: 16, ttl: 1}
		case "ask_task":
			var in struct {
				Question string `json:"question"`
			}
			_ = json.Unmarshal(p.Arguments, &in)
			t = &task{tool: "ask_task", arg: in.Question, ttl: 60000}
		case "forever":
			t = &task{tool: "forever", ttl: 60000}
		default:
			return next(ctx, method, req)
		}
		t.status, t.created, t.updated = "working", now, now
		id, err := a.tasks.add(t)
		if err != nil {
			return nil, err
		}
		out := t.wire(id)
		out.ResultType = "task"
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
		w.InputRequests = mcp.InputRequestMap{"q1": &mcp.ElicitParams{Message: t.arg, RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}, "required": []any{"answer"}}}}
	case "completed":
		w.Result = t.result
	}
	return w
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
			t.status, t.updated = "cancelled", now
		}
		return &wireTask{ResultType: "complete"}, nil
	case "tasks/update":
		if r, ok := p.InputResponses["q1"].(*mcp.ElicitResult); ok && t.status == "input_required" {
			t.status, t.updated = "completed", now
			t.result = textResult(fmt.Sprintf("asked: %s %v", r.Action, r.Content))
		}
		return &wireTask{ResultType: "complete"}, nil
	}
	// tasks/get moves the task one step.
	if t.status == "working" {
		t.step++
		switch {
		case t.tool == "report" && t.step >= 2:
			t.status, t.result = "completed", textResult(report(t.size))
		case t.tool == "ask_task" && t.step >= 2:
			t.status = "input_required"
		}
		t.updated = now
	}
	return t.wire(p.TaskID), nil
}
