package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qstate "github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/protocol"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// mrtrClient connects a client at protocol 2026-07-28 to rt in memory.
// relay false turns the go-sdk client's own multi-round-trip loop off, so
// the test sees quiver's input_required results; answer, when set, is its
// elicitation handler (and announces the capability).
func mrtrClient(t *testing.T, rt *Runtime, relay bool, answer func(*mcp.ElicitParams) *mcp.ElicitResult) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := rt.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	opts := &mcp.ClientOptions{}
	if !relay {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	if answer != nil {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return answer(req.Params), nil
		}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mrtr", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != protocol.Sessionless {
		t.Fatalf("negotiated %s, want %s", v, protocol.Sessionless)
	}
	return cs
}

func accept(answer string) func(*mcp.ElicitParams) *mcp.ElicitResult {
	return func(*mcp.ElicitParams) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}
	}
}

// errorCode returns the code of a tool error result ("" when it is none).
func errorCode(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		return ""
	}
	var e Error
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &e)
	return e.Code
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMRTRRelay: an upstream at 2026-07-28 asks for input during a call of
// a 2026-07-28 client; quiver hands the client the input requests under a
// sealed state of its own and passes the answers to the upstream's retry.
// A tampered, replayed or misapplied state is refused before anything
// reaches the upstream.
func TestMRTRRelay(t *testing.T) {
	t.Parallel()
	rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha", "-extras")}))
	ctx := context.Background()
	raw := mrtrClient(t, rt, false, accept("unused"))
	args := map[string]any{"question": "favourite number?"}

	first := func(t *testing.T, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := raw.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() || res.RequestState == "" {
			t.Fatalf("not input_required: %+v", res)
		}
		ep, ok := res.InputRequests["answer"].(*mcp.ElicitParams)
		if !ok || ep.Message != args["question"] {
			t.Fatalf("input requests %+v", res.InputRequests)
		}
		return res
	}
	send := func(args map[string]any, state string) (*mcp.CallToolResult, error) {
		return raw.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: args, RequestState: state,
			InputResponses: mcp.InputResponseMap{"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "42"}}}})
	}
	retry := func(t *testing.T, args map[string]any, state string) *mcp.CallToolResult {
		t.Helper()
		res, err := send(args, state)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// refused: a state that does not open is a JSON-RPC invalid-params
	// error (SEP-2322), not a tool result.
	refused := func(t *testing.T, what string, args map[string]any, state string) {
		t.Helper()
		res, err := send(args, state)
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(we.Message, CodeRequestStateInvalid+": ") {
			t.Fatalf("%s: %+v %v, want a -32602 %s error", what, res, err, CodeRequestStateInvalid)
		}
	}

	t.Run("relayed", func(t *testing.T) {
		res := first(t, args)
		out := retry(t, args, res.RequestState)
		if out.IsError || !strings.Contains(textOf(out), `asked: accept {"answer":"42"}`) {
			t.Fatalf("retry: %+v %s", out, textOf(out))
		}
		refused(t, "replayed state", args, res.RequestState)
	})
	t.Run("tampered", func(t *testing.T) {
		res := first(t, args)
		s := []byte(res.RequestState)
		s[3] ^= 1
		refused(t, "tampered state", args, string(s))
		refused(t, "forged state", args, "garbage")
	})
	t.Run("other arguments", func(t *testing.T) {
		res := first(t, args)
		refused(t, "state of other arguments", map[string]any{"question": "other?"}, res.RequestState)
	})
	t.Run("answers without a state", func(t *testing.T) {
		// The client may answer what the upstream asks without a
		// state (the upstream keeps none); they go to the upstream as
		// they are, for it to judge.
		out := retry(t, args, "")
		if out.IsError || !strings.Contains(textOf(out), `asked: accept {"answer":"42"}`) {
			t.Fatalf("%+v %s", out, textOf(out))
		}
	})
	t.Run("client loop", func(t *testing.T) {
		cs := mrtrClient(t, rt, true, accept("7"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: args})
		if err != nil || res.IsError || !strings.Contains(textOf(res), `asked: accept {"answer":"7"}`) {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("gateway tool_execute", func(t *testing.T) {
		// The same upstream behind a gateway listener.
		gw, _ := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha", "-extras")}))
		cs := mrtrClient(t, gw, true, accept("9"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolExecute, Arguments: map[string]any{"tool_id": idOf(t, gw, "alpha", "ask"), "args": args}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), `asked: accept`) {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("capability missing", func(t *testing.T) {
		// A request error, -32021 (SEP-2575), as the upstream itself
		// would answer a client that lacks what it needs.
		cs := mrtrClient(t, rt, false, nil)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: args})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != mcp.CodeMissingRequiredClientCapabilities || !strings.HasPrefix(we.Message, CodeClientCapabilityMissing+": ") {
			t.Fatalf("got %+v %v", res, err)
		}
	})
}

// TestMRTRPolicy: a configured policy that does not allow elicit ends the
// call with RELAY_DENIED instead of asking the client, and receipts it.
func TestMRTRPolicy(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("p.yaml", []byte(`policy_id: calls-only
rules:
  - id: calls
    effect: allow
    match: {action: [list, call]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha", "-extras")}, func(r *rig) { r.deps.Policy = p }))
	cs := mrtrClient(t, rt, false, accept("x"))
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := errorCode(t, res); got != CodeRelayDenied {
		t.Fatalf("got %q %+v", got, res)
	}
}

// TestMRTRHeld: an upstream at 2025-11-25 that sends a request in the
// middle of a call for a 2026-07-28 client has its call held: the client
// gets the request as an input_required result, and its retry's answer
// reaches the upstream's request; an unanswered retry is asked again, and
// a policy that does not allow elicit refuses the request to the upstream
// (which reports it) without asking the client.
func TestMRTRHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha", "-extras", "-max-protocol", "2025-11-25")}))
	args := map[string]any{"question": "q"}
	t.Run("client loop", func(t *testing.T) {
		cs := mrtrClient(t, rt, true, accept("x"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit", Arguments: args})
		if err != nil || res.IsError || !strings.Contains(textOf(res), `elicited: accept {"answer":"x"}`) {
			t.Fatalf("got %+v %v", res, err)
		}
	})
	t.Run("rounds", func(t *testing.T) {
		cs := mrtrClient(t, rt, false, accept("unused"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit", Arguments: args})
		if err != nil || !res.NeedsInput() || res.RequestState == "" {
			t.Fatalf("not input_required: %+v %v", res, err)
		}
		ep, ok := res.InputRequests["q1"].(*mcp.ElicitParams)
		if !ok || ep.Message != "q" || ep.RequestedSchema == nil {
			t.Fatalf("input requests %+v", res.InputRequests)
		}
		again, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit", Arguments: args, RequestState: res.RequestState})
		if err != nil || !again.NeedsInput() || again.InputRequests["q1"] == nil || again.RequestState == res.RequestState {
			t.Fatalf("unanswered retry: %+v %v", again, err)
		}
		out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit", Arguments: args, RequestState: again.RequestState,
			InputResponses: mcp.InputResponseMap{"q1": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "42"}}}})
		if err != nil || out.IsError || !strings.Contains(textOf(out), `elicited: accept {"answer":"42"}`) {
			t.Fatalf("answered retry: %+v %v", out, err)
		}
		if n := rt.mrtr.holds.Len(); n != 0 {
			t.Fatalf("%d calls still held", n)
		}
	})
	t.Run("policy", func(t *testing.T) {
		p, err := policy.Parse("p.yaml", []byte("policy_id: calls-only\nrules:\n  - id: calls\n    effect: allow\n    match: {action: [list, call]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha", "-extras", "-max-protocol", "2025-11-25")}, func(r *rig) { r.deps.Policy = p }))
		cs := mrtrClient(t, rt, false, accept("x"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit", Arguments: args})
		if err != nil || res.NeedsInput() || !res.IsError || !strings.Contains(textOf(res), CodeRelayDenied) {
			t.Fatalf("got %+v %v %s", res, err, textOf(res))
		}
	})
}

// TestMRTRStateRefusals: the refusals of resume, one per kind of bad
// state, each a REQUEST_STATE_INVALID with its own message.
func TestMRTRStateRefusals(t *testing.T) {
	t.Parallel()
	key, _ := protocol.NewKey()
	now := time.Now()
	seal, err := protocol.NewSealer(key, protocol.SealerOptions{TTL: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	m := &mrtr{seal: seal}
	args := map[string]any{"a": 1.0}
	sealed := func(principal string) string {
		s, err := seal.Seal(protocol.State{Upstream: "u", Target: "t", ArgsHash: argsHash(args), Principal: principal, InputIDs: []string{"x"}, Round: 1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	resume := func(c *caller) error {
		_, _, _, err := m.resume(withCaller(context.Background(), c), "u", "t", args)
		return err
	}
	local := func(state string) *caller {
		return &caller{local: true, sessionless: true, reqState: state, inputs: mcp.InputResponseMap{"x": &mcp.ElicitResult{Action: "decline"}, "extra": &mcp.ElicitResult{}}}
	}
	want := func(t *testing.T, err error, msg string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeRequestStateInvalid || !strings.Contains(e.Message, msg) {
			t.Fatalf("got %v, want %s with %q", err, CodeRequestStateInvalid, msg)
		}
	}

	c := local(sealed("local:"))
	answers, _, round, err := m.resume(withCaller(context.Background(), c), "u", "t", args)
	if err != nil || round != 2 || len(answers) != 1 || answers["x"] == nil {
		t.Fatalf("resume: %v %d %v", answers, round, err)
	}
	// The same request resumes with what it opened (a retried dispatch).
	if _, _, r, err := m.resume(withCaller(context.Background(), c), "u", "t", args); err != nil || r != 2 {
		t.Fatalf("second resume of one request: %d %v", r, err)
	}
	s := sealed("local:")
	if err := resume(local(s)); err != nil {
		t.Fatal(err)
	}
	want(t, resume(local(s)), "used already")
	want(t, resume(local(sealed("jwt:someone"))), "another caller")
	want(t, resume(&caller{sessionless: true, reqState: sealed("local:")}), "another caller")
	old := sealed("local:")
	now = now.Add(2 * time.Minute)
	want(t, resume(local(old)), "expired")
	want(t, resume(local(sealed("local:")[1:])), "not one quiver issued")
	if _, _, _, err := m.resume(withCaller(context.Background(), local(sealed("local:"))), "u", "other", args); err == nil {
		t.Fatal("a state for another target opened")
	}

	// States of held calls (nothing is started for a refused one).
	holds, err := protocol.NewHolds(protocol.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer holds.Close()
	m.holds = holds
	heldState := func(principal, replica, id string) string {
		s, err := seal.Seal(protocol.State{Upstream: "u", Target: "t", ArgsHash: argsHash(args), Principal: principal,
			InputIDs: []string{"q1"}, Round: 1, Held: id, Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	held := func(state string, c *caller) error {
		if c == nil {
			c = local(state)
		}
		_, _, _, err := m.held(withCaller(context.Background(), c), "u", "", "t", args, func(context.Context) (any, error) {
			t.Error("a refused retry started a call")
			return nil, nil
		})
		return err
	}
	want(t, held(heldState("jwt:someone", holds.Replica(), "h"), nil), "another caller")
	want(t, held(heldState("local:", "elsewhere", "h"), nil), "another quiver process or replica")
	want(t, held(heldState("local:", holds.Replica(), "gone"), nil), "held call has ended")
	s = heldState("local:", holds.Replica(), "gone")
	_ = held(s, nil)
	want(t, held(s, nil), "used already")
	// A state of a held call does not open on the relay path.
	want(t, resume(local(heldState("local:", holds.Replica(), "h"))), "names a held call")
}

// TestSealingKey: the key is made once in the state backend and read back
// by every process that shares it; a malformed stored key is refused.
func TestSealingKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv := qstate.NewMemory(nil)
	k1, err := sealingKey(ctx, kv)
	if err != nil || len(k1) != protocol.KeySize {
		t.Fatal(err)
	}
	k2, err := sealingKey(ctx, kv)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("key not shared: %v", err)
	}
	if err := kv.Set(ctx, sealingKeyName, []byte("short"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sealingKey(ctx, kv); err == nil {
		t.Fatal("a short key was accepted")
	}
	down := statetest.NewFailing(qstate.NewMemory(nil))
	down.SetDown(true)
	if _, err := sealingKey(ctx, down); !errors.Is(err, qstate.ErrUnavailable) {
		t.Fatalf("key from a store that is down: %v", err)
	}
}

// TestMRTRPrimitives: prompts and resources that ask for input, in direct
// mode (prompts/get, resources/read) and through the gateway's prompt_get
// and resource_read; a retry with a forged state is refused with a
// JSON-RPC invalid-params error.
func TestMRTRPrimitives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// An upstream at 2026-07-28 answers input_required (relayed); one held
	// to 2025-11-25 asks in the middle of the call (held).
	for rev, flags := range map[string][]string{
		"2026-07-28": {"-ask-primitives"},
		"2025-11-25": {"-ask-primitives", "-max-protocol", "2025-11-25"},
	} {
		t.Run(rev+"/direct", func(t *testing.T) {
			t.Parallel()
			rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha", flags...)}))
			cs := mrtrClient(t, rt, true, accept("pw"))
			pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "interview"})
			if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "interviewed: pw" {
				t.Fatalf("prompts/get: %+v %v", pr, err)
			}
			// The go-sdk's own server refuses a resource read that
			// answers with input requests at 2025-11-25 ("read handler
			// returned nil information"), so only prompts ask there.
			if rev != "2025-11-25" {
				rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://secret"})
				if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "secret for pw" {
					t.Fatalf("resources/read: %+v %v", rr, err)
				}
			}
			raw := mrtrClient(t, rt, false, accept("pw"))
			first, err := raw.GetPrompt(ctx, &mcp.GetPromptParams{Name: "interview"})
			if err != nil || !first.NeedsInput() || first.RequestState == "" {
				t.Fatalf("first round: %+v %v", first, err)
			}
			_, err = raw.GetPrompt(ctx, &mcp.GetPromptParams{Name: "interview", RequestState: first.RequestState + "x",
				InputResponses: mcp.InputResponseMap{"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "pw"}}}})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(we.Message, CodeRequestStateInvalid+": ") {
				t.Fatalf("forged state: %v", err)
			}
		})
		t.Run(rev+"/gateway", func(t *testing.T) {
			t.Parallel()
			rt, _ := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha", flags...)}))
			waitFor(t, "primitives", func() bool { return len(rt.Snapshot().Items("prompt")) > 0 })
			var promptID, resourceID string
			for _, it := range rt.Snapshot().Items("prompt") {
				if it.UpstreamName == "interview" {
					promptID = it.ID
				}
			}
			for _, it := range rt.Snapshot().Items("resource") {
				if it.UpstreamName == "test://secret" {
					resourceID = it.ID
				}
			}
			cs := mrtrClient(t, rt, true, accept("pw"))
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: PromptGet, Arguments: map[string]any{"prompt_id": promptID}})
			if err != nil || res.IsError || !strings.Contains(textOf(res), "interviewed: pw") {
				t.Fatalf("prompt_get: %+v %v", res, err)
			}
			if rev == "2025-11-25" {
				return
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ResourceRead, Arguments: map[string]any{"resource_id": resourceID}})
			if err != nil || res.IsError || !strings.Contains(textOf(res), "secret for pw") {
				t.Fatalf("resource_read: %+v %v", res, err)
			}
		})
	}
}

// TestSessionlessErrorResults: quiver's own tool errors reach a client at
// 2026-07-28 as complete results (resultType "complete"), as the go-sdk's
// own tool results do, over HTTP where the wire shows it.
func TestSessionlessErrorResults(t *testing.T) {
	t.Parallel()
	rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha")}))
	srv := httptest.NewServer(rt.Handler("/mcp"))
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":1},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"isError":true`) || !strings.Contains(string(b), `"resultType":"complete"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestUpstreamProtocolPin: upstreams[].protocol holds an upstream to a
// revision, so that its requests in the middle of a call (forbidden at
// 2026-07-28) reach a 2025-11-25 client.
func TestUpstreamProtocolPin(t *testing.T) {
	t.Parallel()
	up := liveUpstream("alpha", "-extras")
	up.cfg.Protocol = "2025-11-25"
	rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{up}))
	if got := rt.clients()[0].State().Protocol; got != "2025-11-25" {
		t.Fatalf("upstream negotiated %q", got)
	}
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := rt.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "old", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
		}}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit", Arguments: map[string]any{"question": "q"}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), `elicited: accept {"answer":"yes"}`) {
		t.Fatalf("%+v %v %s", res, err, textOf(res))
	}
}

// TestMRTRReceipts: each relayed input request leaves a receipt of its
// own, and a refused retry a deny receipt with REQUEST_STATE_INVALID.
func TestMRTRReceipts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rt, _ := startRuntime(t, setup(t, config.ModeDirect, []testUpstream{liveUpstream("alpha", "-extras")}, func(r *rig) { r.cfg.StateDir = dir }))
	if k, err := rt.kv.Get(context.Background(), sealingKeyName); err != nil || len(k) != protocol.KeySize {
		t.Fatalf("no sealing key in the state backend: %v", err)
	}
	ctx := context.Background()
	cs := mrtrClient(t, rt, false, accept("x"))
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "q"}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("%+v %v", first, err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "q"}, RequestState: "x" + first.RequestState}); err == nil {
		t.Fatal("a forged state was accepted")
	}
	if err := rt.rec.out.Flush(); err != nil {
		t.Fatal(err)
	}
	var asked, refused bool
	err = receipts.Reader{Dir: filepath.Join(dir, receipts.DirName)}.Query(ctx, receipts.Filter{}, func(r receipts.Receipt) error {
		switch {
		case r.MCP.Method == "elicitation/create" && r.MCP.ServerID == "alpha" && r.Decision.Result == "allow":
			asked = true
		case r.Outcome.ErrorCode == CodeRequestStateInvalid && r.Decision.Result == "deny":
			refused = true
		}
		return nil
	})
	if err != nil || !asked || !refused {
		t.Fatalf("receipts: input request %v, refused retry %v (%v)", asked, refused, err)
	}
}

// TestAffineSpec: a per-client session is held to its client's revision
// when that is older than the upstream's pin (or there is none).
func TestAffineSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pin, client, want string }{
		{"", "2025-11-25", "2025-11-25"},
		{"", "2024-11-05", "2024-11-05"},
		{"", "2026-07-28", ""},
		{"", "", ""},
		{"2025-06-18", "2025-11-25", "2025-06-18"},
		{"2025-11-25", "2025-03-26", "2025-03-26"},
	} {
		if got := affineSpec(upstream.Spec{Protocol: tc.pin}, tc.client).Protocol; got != tc.want {
			t.Errorf("pin %q, client %q: %q, want %q", tc.pin, tc.client, got, tc.want)
		}
	}
}
