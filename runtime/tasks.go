package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) passes
// through: when a client at 2026-07-28 that declares it calls a tool of an
// upstream that declares it, quiver offers the extension to the upstream on
// that client's behalf (and on no one else's), and an upstream that answers
// with a task has it relayed under a task id of quiver's (protocol.TaskRef,
// sealed: bound to the principal, the upstream and the tool, with an
// expiry). The client's tasks/get, tasks/update and tasks/cancel open that
// id and go to the upstream; an id that does not open is refused and
// nothing reaches an upstream. A task's input requests are decided as every
// relayed input request is (decideInput: the sample and elicit policy, the
// client's capabilities, the incident switch), when they are relayed and
// again when they are answered; a task's final result takes the result
// path of a synchronous one (settle: output validation and policy, the
// firewall, direct shaping) each time it is read.

// ReasonTaskForeign: a tasks/* request named a task id issued to another
// principal (refused as an unknown one, TASK_INVALID).
const ReasonTaskForeign = "TASK_FOREIGN"

// taskRelay is what an upstream conn that relays tasks offers (liveConn).
type taskRelay interface {
	// offersTasks reports whether the upstream declared the extension.
	offersTasks() bool
	getTask(ctx context.Context, id string, caps any) (*upstream.Task, error)
	updateTask(ctx context.Context, id string, caps any, answers mcp.InputResponseMap) error
	cancelTask(ctx context.Context, id string, caps any) error
}

// offersTasks also requires an upstream at 2026-07-28 or later: an older
// one's calls for sessionless callers are held (mrtr.go), detached from
// the request.
func (l liveConn) offersTasks() bool {
	return l.c.OffersTasks() && !protocol.AsksMidCall(l.c.State().Protocol)
}

func (l liveConn) getTask(ctx context.Context, id string, caps any) (*upstream.Task, error) {
	return l.c.GetTask(ctx, id, caps)
}

func (l liveConn) updateTask(ctx context.Context, id string, caps any, answers mcp.InputResponseMap) error {
	return l.c.UpdateTask(ctx, id, caps, answers)
}

func (l liveConn) cancelTask(ctx context.Context, id string, caps any) error {
	return l.c.CancelTask(ctx, id, caps)
}

// declaresTasks reports whether the caller's request declared the tasks
// extension in its per-request capabilities (2026-07-28 only: before, a
// client has no way to).
func (c *caller) declaresTasks() bool {
	if c == nil || !c.sessionless {
		return false
	}
	m, _ := c.capsMeta.(map[string]any)
	ext, _ := m["extensions"].(map[string]any)
	_, ok := ext[protocol.TasksExtension]
	return ok
}

// upstreamCaps is the caller's capabilities as the upstream sees them:
// the tasks extension only when quiver offers it for this call.
func (c *caller) upstreamCaps() any {
	m, ok := c.capsMeta.(map[string]any)
	if !ok || c.offerTask || !c.declaresTasks() {
		return c.capsMeta
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	ext := map[string]any{}
	for k, v := range m["extensions"].(map[string]any) {
		if k != protocol.TasksExtension {
			ext[k] = v
		}
	}
	if len(ext) == 0 {
		delete(out, "extensions")
	} else {
		out["extensions"] = ext
	}
	return out
}

// offerTasks decides whether quiver offers the extension to the upstream
// for this call: the caller declared it, the upstream declared it, and
// nothing of the call waits for its result (an idempotency record, the
// read-side document guards, the cache).
func (r *Runtime) offerTasks(ctx context.Context, c conn, waits bool) bool {
	cl := callerOf(ctx)
	if waits || r.mrtr == nil || r.mrtr.seal == nil || !cl.declaresTasks() {
		return false
	}
	tr, ok := c.(taskRelay)
	return ok && tr.offersTasks()
}

// upstreamTask checks a task answer of upstream uc for the call in ctx:
// one quiver did not offer the extension for is refused (the spec forbids
// it), and one it did is kept on the caller for startTask.
func upstreamTask(ctx context.Context, uc *upstream.Client, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	t, ok, err := uc.TaskOf(res)
	if !ok {
		return res, nil
	}
	c := callerOf(ctx)
	switch {
	case err != nil:
		return nil, newError(CodeUpstreamError, "the upstream answered with a malformed task").withCause(err)
	case c == nil || !c.offerTask:
		return nil, newError(CodeUpstreamError, "the upstream answered with a task, and the request did not offer the tasks extension")
	case len(t.TaskID) > protocol.MaxUpstreamTaskID:
		return nil, newError(CodeUpstreamError, "the upstream's task id is longer than %d bytes", protocol.MaxUpstreamTaskID)
	}
	c.task = t
	return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
}

// taskAnswer is a task as quiver relays it: a CreateTaskResult (resultType
// "task") or a tasks/get result (resultType "complete").
type taskAnswer = upstream.TaskResult

// startTask answers the call in ctx, which the upstream answered with a
// task, with that task under quiver's id.
func (r *Runtime) startTask(ctx context.Context, it *catalog.Item, direct bool) (*mcp.CallToolResult, *Error) {
	c := callerOf(ctx)
	t := c.task
	ttl := time.Duration(0)
	if t.TTLMs != nil && *t.TTLMs > 0 {
		ttl = time.Duration(*t.TTLMs) * time.Millisecond
	}
	id, err := r.mrtr.seal.SealTask(protocol.TaskRef{Upstream: it.Server, TaskID: t.TaskID, ToolID: it.ID, Direct: direct, Principal: c.stateKey()}, ttl)
	if err != nil {
		return nil, newError(CodeInternal, "the task could not be relayed").withCause(err)
	}
	// A CreateTaskResult is the Task alone: what a status brings (a
	// result, an error, input requests) comes with tasks/get, decided
	// and shaped there.
	base := *t
	base.InputRequests, base.Result, base.Error = nil, nil, nil
	base.StatusMessage = sanitize(base.StatusMessage)
	out := &taskAnswer{Task: &base}
	out.TaskID, out.ResultType = id, "task"
	c.answer = out
	r.log.Debug("task relayed", "tool_id", it.ID, "server", it.Server, "status", t.Status)
	return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
}

// relayTask is the client's view of upstream task t: the input requests
// decided, the final result through the result path, a failure's error
// as a JSON-RPC error object. cancel cancels the upstream task when one of
// its input requests is refused.
func (r *Runtime) relayTask(ctx context.Context, ss *mcp.ServerSession, st *state, it *catalog.Item, ref protocol.TaskRef, t *upstream.Task, cancel func() error) (*taskAnswer, *Error) {
	out := *t
	out.InputRequests, out.Result, out.Error = nil, nil, nil
	switch t.Status {
	case upstream.TaskInputRequired:
		c := callerOf(ctx)
		ids := slices.Sorted(maps.Keys(t.InputRequests))
		for _, id := range ids {
			if err := r.decideInput(c, ref.Upstream, ref.ToolID, t.InputRequests[id]); err != nil {
				// The task cannot go on without the answer quiver
				// withholds: it is cancelled upstream, and the client
				// sees it cancelled (as every later tasks/get will
				// say), with the refusal as its status message.
				if cancel != nil {
					if cerr := cancel(); cerr != nil {
						r.log.Warn("cancelling a task whose input request was refused failed", "server", ref.Upstream, "err", cerr)
					}
				}
				var e *Error
				if !errors.As(err, &e) {
					e = newError(CodeInternal, "the input request could not be decided")
				}
				out.Status, out.StatusMessage = upstream.TaskCancelled, sanitize(e.Code+": "+e.Message)
				return &taskAnswer{Task: &out}, nil
			}
		}
		out.InputRequests = t.InputRequests
	case upstream.TaskCompleted:
		var res mcp.CallToolResult
		if err := json.Unmarshal(t.Result, &res); err != nil {
			return nil, newError(CodeUpstreamError, "the upstream's task result is not a tool result").withCause(err)
		}
		s, e := r.settle(ctx, ss, st, it, &res, 0, ref.Direct)
		if e != nil {
			// Refused by the result path: the client gets the refusal
			// as the task's result, as it would get it from the call.
			b, _ := json.Marshal(errorResult(e))
			out.Result = b
			return &taskAnswer{Task: &out}, nil
		}
		b, err := json.Marshal(s.answer(it, r.structuredOf(it, s, ref.Direct), ref.Direct))
		if err != nil {
			return nil, newError(CodeInternal, "the task result could not be encoded").withCause(err)
		}
		out.Result = b
	case upstream.TaskFailed:
		msg := "the upstream task failed"
		if t.Error != nil {
			msg = sanitize(t.Error.Message)
		}
		out.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
		if t.Error != nil {
			out.Error.Code = t.Error.Code
		}
	}
	out.StatusMessage = sanitize(out.StatusMessage)
	return &taskAnswer{Task: &out}, nil
}

// openTask opens the task id of a tasks/* request for its caller and
// returns what it stands for, with the upstream and tool it names. A
// refusal is receipted by the middleware; nothing reached an upstream.
func (r *Runtime) openTask(ctx context.Context, id string) (protocol.TaskRef, taskRelay, *catalog.Item, *state, *Error) {
	c := callerOf(ctx)
	if !c.declaresTasks() {
		e := newError(CodeClientCapabilityMissing, "the request does not declare the %s extension", protocol.TasksExtension)
		e.rpcData = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + protocol.TasksExtension + `":{}}}}`)
		return protocol.TaskRef{}, nil, nil, nil, e
	}
	if r.mrtr == nil || r.mrtr.seal == nil {
		return protocol.TaskRef{}, nil, nil, nil, newError(CodeInternal, "the runtime is not started")
	}
	ref, err := r.mrtr.seal.OpenTask(id, c.stateKey())
	if err != nil {
		msg := "Failed to retrieve task: Task not found"
		if errors.Is(err, protocol.ErrTaskExpired) {
			msg = "Failed to retrieve task: Task has expired"
		}
		if errors.Is(err, protocol.ErrTaskForeign) {
			// Told apart in the receipt only: to the caller, another's
			// task does not exist.
			c.reasons = append(c.reasons, ReasonTaskForeign)
		}
		return protocol.TaskRef{}, nil, nil, nil, newError(CodeTaskInvalid, "%s", msg).withPath("taskId")
	}
	st := r.state.Load()
	c.rc.MCP.ServerID, c.rc.MCP.ToolID = ref.Upstream, ref.ToolID
	it, ok := st.snap.Lookup(ref.ToolID)
	if !ok {
		return ref, nil, nil, nil, newError(CodeTaskInvalid, "Failed to retrieve task: its tool is no longer in the catalog").withPath("taskId")
	}
	c.rc.MCP.ToolName = it.UpstreamName
	var up taskRelay
	if ent, found := st.owner[ref.Upstream]; found {
		up, _ = ent.conn.(taskRelay)
	}
	if up == nil {
		return ref, nil, nil, nil, newError(CodeUpstreamUnavailable, "the upstream of the task is not connected")
	}
	return ref, up, it, st, nil
}

// taskRequest is the params of a client's tasks/get, tasks/update and
// tasks/cancel. Its input responses are read only for the input requests
// the upstream has outstanding: the spec lets a server ignore the others,
// whatever their shape.
type taskRequest struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// handleTaskGet serves tasks/get.
func (r *Runtime) handleTaskGet(ctx context.Context, ss *mcp.ServerSession, p *taskRequest) (*taskAnswer, error) {
	ref, up, it, st, e := r.openTask(ctx, p.TaskID)
	if e != nil {
		return nil, e
	}
	c := callerOf(ctx)
	t, err := up.getTask(ctx, ref.TaskID, c.capsMeta)
	if err != nil {
		return nil, classify(err)
	}
	if t.TaskID != ref.TaskID {
		return nil, newError(CodeUpstreamError, "the upstream answered tasks/get with another task")
	}
	out, e := r.relayTask(ctx, ss, st, it, ref, t, func() error { return up.cancelTask(ctx, ref.TaskID, c.capsMeta) })
	if e != nil {
		return nil, e
	}
	out.TaskID, out.ResultType = p.TaskID, "complete"
	return out, nil
}

// handleTaskUpdate serves tasks/update: each answer must be to an input
// request the upstream has outstanding, and is decided again (the policy
// or the incident switch may have changed since it was relayed).
func (r *Runtime) handleTaskUpdate(ctx context.Context, _ *mcp.ServerSession, p *taskRequest) (*taskAnswer, error) {
	ref, up, _, _, e := r.openTask(ctx, p.TaskID)
	if e != nil {
		return nil, e
	}
	c := callerOf(ctx)
	t, err := up.getTask(ctx, ref.TaskID, c.capsMeta)
	if err != nil {
		return nil, classify(err)
	}
	answers := make(mcp.InputResponseMap, len(p.InputResponses))
	for id, raw := range p.InputResponses {
		ir, ok := t.InputRequests[id]
		if !ok || t.Status != upstream.TaskInputRequired {
			// The spec lets a server ignore an answer to an unknown or
			// satisfied request; quiver does not pass it on.
			continue
		}
		one := mcp.InputResponseMap{}
		if b, err := json.Marshal(map[string]json.RawMessage{id: raw}); err != nil || json.Unmarshal(b, &one) != nil {
			return nil, newError(CodeInvalidParams, "inputResponses[%q] is not an elicitation, sampling or roots response", id).withPath("inputResponses")
		}
		if err := r.decideInput(c, ref.Upstream, ref.ToolID, ir); err != nil {
			return nil, err
		}
		answers[id] = one[id]
	}
	if len(answers) > 0 {
		if err := up.updateTask(ctx, ref.TaskID, c.capsMeta, answers); err != nil {
			return nil, classify(err)
		}
	}
	return &taskAnswer{ResultType: "complete"}, nil
}

// handleTaskCancel serves tasks/cancel.
func (r *Runtime) handleTaskCancel(ctx context.Context, _ *mcp.ServerSession, p *taskRequest) (*taskAnswer, error) {
	ref, up, _, _, e := r.openTask(ctx, p.TaskID)
	if e != nil {
		return nil, e
	}
	if err := up.cancelTask(ctx, ref.TaskID, callerOf(ctx).capsMeta); err != nil {
		return nil, classify(err)
	}
	return &taskAnswer{ResultType: "complete"}, nil
}

// registerTaskMethods serves the extension's methods on s.
func (r *Runtime) registerTaskMethods(s *mcp.Server) error {
	for m, h := range map[string]func(context.Context, *mcp.ServerSession, *taskRequest) (*taskAnswer, error){
		"tasks/get": r.handleTaskGet, "tasks/update": r.handleTaskUpdate, "tasks/cancel": r.handleTaskCancel,
	} {
		if err := mcp.AddReceivingCustomMethod(s, m, h); err != nil {
			return err
		}
	}
	return nil
}

// taskCapability is receiving middleware that keeps the extension out of
// the capabilities quiver declares while it cannot honour it: in every
// initialize result (a session's client is older than the extension) and
// in server/discover while no upstream offers tasks (then no call of
// quiver's can become a task, and a client should not plan on one).
func (r *Runtime) taskCapability(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		var caps *mcp.ServerCapabilities
		switch v := res.(type) {
		case *mcp.InitializeResult:
			caps = v.Capabilities
		case *mcp.DiscoverResult:
			if r.offersTasks() {
				return res, err
			}
			caps = v.Capabilities
		}
		if caps != nil && caps.Extensions != nil {
			// The result's capabilities are the go-sdk's copy; its
			// maps may still be shared, so the map is replaced.
			ext := make(map[string]any, len(caps.Extensions))
			for k, v := range caps.Extensions {
				if k != protocol.TasksExtension {
					ext[k] = v
				}
			}
			caps.Extensions = ext
			if len(ext) == 0 {
				caps.Extensions = nil
			}
		}
		return res, err
	}
}

// offersTasks reports whether any upstream offers tasks now.
func (r *Runtime) offersTasks() bool {
	st := r.state.Load()
	if st == nil {
		return false
	}
	for _, ent := range st.owner {
		if tr, ok := ent.conn.(taskRelay); ok && tr.offersTasks() {
			return true
		}
	}
	return false
}
