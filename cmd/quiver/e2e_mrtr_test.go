//lint:file-ignore SA1019 roots and sampling are deprecated in protocol 2026-07-28 only; quiver relays them for the protocols that have them, which is what these tests check.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mrtrConfig writes a configuration in mode with two test upstreams with
// -extras: "new" negotiates 2026-07-28 (it asks for input with
// input_required results) and "old" is held to 2025-11-25 (the go-sdk
// turns the same results into requests in the middle of the call).
func mrtrConfig(t *testing.T, mode string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "mode: %s\nenvironment: dev\nstate_dir: %s\nupstreams:\n", mode, filepath.Join(dir, "state"))
	fmt.Fprintf(&b, "  - name: new\n    command: [%q, \"-extras\", \"-mrtr-tools\", \"-name\", \"new\"]\n", upstreamBin)
	fmt.Fprintf(&b, "  - name: old\n    command: [%q, \"-extras\", \"-mrtr-tools\", \"-name\", \"old\", \"-max-protocol\", \"2025-11-25\"]\n", upstreamBin)
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(b.String()), 0o644))
	return cfg
}

// mrtrCall calls tool of upstream with args: by its listed name in direct
// mode, through tool_execute in gateway mode.
func mrtrCall(t *testing.T, c *fwdClient, mode, upstream, tool string, args map[string]any) (string, bool) {
	t.Helper()
	name, callArgs := upstream+"__"+tool, args
	if mode == "gateway" {
		// tool_browse answers one card per line: id | name | ...
		text := c.mustCall(t, "tool_browse", map[string]any{"query": tool, "top_k": 50})
		id := ""
		for line := range strings.SplitSeq(text, "\n") {
			if f, _, _ := strings.Cut(line, " | "); strings.HasPrefix(f, upstream+":"+tool+"#") {
				id = f
			}
		}
		if id == "" {
			t.Fatalf("no card for %s:%s in %s", upstream, tool, text)
		}
		name, callArgs = "tool_execute", map[string]any{"tool_id": id, "args": args}
	}
	text, isErr, err := c.call(context.Background(), name, callArgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mode == "gateway" && !isErr {
		// The envelope carries the upstream's result inline.
		var env struct {
			Status string `json:"status"`
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(text), &env); err != nil {
			t.Fatalf("envelope: %v: %s", err, text)
		}
		var parts []string
		for _, c := range env.Result.Content {
			parts = append(parts, c.Text)
		}
		return strings.Join(parts, "\n"), env.Status != "ok"
	}
	return text, isErr
}

// TestE2EForwardMRTR: elicitation, sampling and roots of upstreams at
// 2026-07-28 and 2025-11-25 reach clients at both revisions (all four
// pairs), in gateway and direct modes, over stdio and HTTP. A 2026-07-28
// client gets them as input_required results under quiver's sealed state
// (the go-sdk client's loop answers them with its handlers): relayed from
// a 2026-07-28 upstream, and from a 2025-11-25 upstream's request in the
// middle of a call, whose upstream call quiver holds until the retry. A
// 2025-11-25 client gets them as requests on its session.
func TestE2EForwardMRTR(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"direct", "gateway"} {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(mode+"/"+transport, func(t *testing.T) {
				t.Parallel()
				var srv *httpServer
				if transport == "http" {
					srv = startHTTP(t, "--config", mrtrConfig(t, mode))
				}
				for _, rev := range []string{"2026-07-28", "2025-11-25"} {
					c := newFwdClient("c" + strings.ReplaceAll(rev, "-", ""))
					c.so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
					c.roots = []*mcp.Root{{URI: "file:///work/" + c.name, Name: c.name}}
					if transport == "http" {
						c.connectHTTP(t, srv, true)
					} else {
						// Each stdio client runs a quiver of its own,
						// with a state_dir of its own.
						c.connectStdio(t, true, "--config", mrtrConfig(t, mode))
					}
					if got := c.cs.InitializeResult().ProtocolVersion; got != rev {
						t.Fatalf("negotiated %s, want %s", got, rev)
					}
					if mode == "direct" {
						c.waitTools(t, "new__ask", "new__consult", "new__roots", "old__ask", "old__consult", "old__roots")
					}
					for _, up := range []string{"new", "old"} {
						q := fmt.Sprintf("question of %s via %s", c.name, up)
						p := fmt.Sprintf("prompt of %s via %s", c.name, up)
						ask, askErr := mrtrCall(t, c, mode, up, "ask", map[string]any{"question": q})
						consult, consultErr := mrtrCall(t, c, mode, up, "consult", map[string]any{"prompt": p})
						roots, rootsErr := mrtrCall(t, c, mode, up, "roots", map[string]any{})
						if askErr || !strings.Contains(ask, `asked: accept {"answer":"answer-of-`+c.name+` to `+q+`"}`) {
							t.Errorf("%s client, %s upstream: ask = %q (error %v)", rev, up, ask, askErr)
						}
						if consultErr || !strings.Contains(consult, "consulted: model-"+c.name+" answer-of-"+c.name+" to "+p) {
							t.Errorf("%s client, %s upstream: consult = %q (error %v)", rev, up, consult, consultErr)
						}
						if rootsErr || !strings.Contains(roots, "roots: file:///work/"+c.name) {
							t.Errorf("%s client, %s upstream: roots = %q (error %v)", rev, up, roots, rootsErr)
						}
					}
				}
				if t.Failed() && srv != nil {
					t.Logf("quiver log:\n%s", srv.log())
				}
			})
		}
	}
}

// holdConfig writes a direct-mode configuration with one upstream held to
// 2025-11-25 ("old", with -extras), recording its calls in record; hold
// is listen.mrtr_hold ("" for the default).
func holdConfig(t *testing.T, record, hold string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "mode: direct\nenvironment: dev\nstate_dir: %s\n", filepath.Join(dir, "state"))
	if hold != "" {
		fmt.Fprintf(&b, "listen: {mrtr_hold: %s}\n", hold)
	}
	fmt.Fprintf(&b, "upstreams:\n  - name: old\n    command: [%q, \"-mrtr-tools\", \"-name\", \"old\", \"-max-protocol\", \"2025-11-25\", \"-record\", %q]\n", upstreamBin, record)
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(b.String()), 0o644))
	return cfg
}

// holdSession connects a 2026-07-28 client that announces elicitation and
// answers input_required results itself (the go-sdk's loop is off).
func holdSession(t *testing.T, srv *httpServer) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "holder", Version: "1"}, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	ctx, cancel := context.WithTimeout(context.Background(), fwdTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s", v)
	}
	return cs
}

// holdCall calls old__elicit_wait with question q (sleeping ms after the
// answer), answering input request id with "yes" when id is set.
func holdCall(ctx context.Context, cs *mcp.ClientSession, q string, ms int, id, state string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: "old__elicit_wait", Arguments: map[string]any{"question": q, "ms": ms}, RequestState: state}
	if id != "" {
		p.InputResponses = mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fwdTimeout)
		defer cancel()
	}
	return cs.CallTool(ctx, p)
}

// holdAsked checks that res asks question q and returns its id and state.
func holdAsked(t *testing.T, res *mcp.CallToolResult, err error, q string) (string, string) {
	t.Helper()
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		t.Fatalf("want one input request and a state, got %+v %s", res, text)
	}
	for id, ir := range res.InputRequests {
		if ep, ok := ir.(*mcp.ElicitParams); !ok || ep.Message != q {
			t.Fatalf("input request %q = %#v, want an elicitation of %q", id, ir, q)
		}
		return id, res.RequestState
	}
	return "", ""
}

// TestE2EForwardHold: a 2025-11-25 upstream's elicitation in the middle of
// a call for a 2026-07-28 client holds the upstream call until the
// client's retry. An unanswered retry is asked again; a replayed state, a
// retry on another replica, a retry after the hold timeout and a retry
// whose request was cancelled are refused with REQUEST_STATE_INVALID,
// and no call reaches the upstream twice.
func TestE2EForwardHold(t *testing.T) {
	t.Parallel()
	record := filepath.Join(t.TempDir(), "calls.jsonl")
	cfg := holdConfig(t, record, "")
	a, b := startHTTP(t, "--config", cfg), startHTTP(t, "--config", cfg)
	ca, cb := holdSession(t, a), holdSession(t, b)
	refused := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "REQUEST_STATE_INVALID") || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want REQUEST_STATE_INVALID: ...%s...", err, want)
		}
	}
	ctx := context.Background()

	t.Run("answered, then replayed", func(t *testing.T) {
		res, err := holdCall(ctx, ca, "q-replay", 0, "", "")
		id, st := holdAsked(t, res, err, "q-replay")
		// No answer: the same request again, under a new state.
		res, err = holdCall(ctx, ca, "q-replay", 0, "", st)
		id2, st2 := holdAsked(t, res, err, "q-replay")
		if id2 != id || st2 == st {
			t.Fatalf("re-asked as %q under %q, want %q under a new state", id2, st2, id)
		}
		res, err = holdCall(ctx, ca, "q-replay", 0, id, st2)
		if err != nil || res.NeedsInput() || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `elicited: accept {"answer":"yes"}`) {
			t.Fatalf("answered retry: %+v, %v", res, err)
		}
		_, err = holdCall(ctx, ca, "q-replay", 0, id, st2)
		refused(t, err, "used already")
		_, err = holdCall(ctx, ca, "q-replay", 0, id, st)
		refused(t, err, "used already")
	})
	t.Run("another replica", func(t *testing.T) {
		res, err := holdCall(ctx, ca, "q-replica", 0, "", "")
		id, st := holdAsked(t, res, err, "q-replica")
		_, err = holdCall(ctx, cb, "q-replica", 0, id, st)
		refused(t, err, "held by another quiver process or replica")
	})
	t.Run("cancelled", func(t *testing.T) {
		elicited := holdEvents(t, record, "elicited")
		res, err := holdCall(ctx, ca, "q-cancel", 600000, "", "")
		id, st := holdAsked(t, res, err, "q-cancel")
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := holdCall(cctx, ca, "q-cancel", 600000, id, st)
			done <- err
		}()
		// The answer reached the upstream, which now sleeps.
		fwdWaitRecorded(t, record, "elicited", "elicit_wait", elicited+1)
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a cancelled retry returned no error")
		}
		fwdWaitRecorded(t, record, "cancelled", "elicit_wait", 1)
		_, err = holdCall(ctx, ca, "q-cancel", 0, id, st)
		refused(t, err, "used already")
	})
	t.Run("expired", func(t *testing.T) {
		record := filepath.Join(t.TempDir(), "calls.jsonl")
		e := startHTTP(t, "--config", holdConfig(t, record, "200ms"))
		ce := holdSession(t, e)
		res, err := holdCall(ctx, ce, "q-expire", 0, "", "")
		id, st := holdAsked(t, res, err, "q-expire")
		// The hold timeout cancels the upstream call: its elicitation
		// fails.
		fwdWaitRecorded(t, record, "elicit-failed", "elicit_wait", 1)
		_, err = holdCall(ctx, ce, "q-expire", 0, id, st)
		refused(t, err, "held call has ended")
		if n := holdEvents(t, record, "call"); n != 1 {
			t.Errorf("the upstream saw %d calls, want 1", n)
		}
	})
	// One upstream call per first try, whatever the retries did.
	if n := holdEvents(t, record, "call"); n != 3 {
		t.Errorf("the upstream saw %d calls, want 3", n)
	}
	if t.Failed() {
		t.Logf("quiver A:\n%s\nquiver B:\n%s", a.log(), b.log())
	}
}

// holdEvents counts the events of elicit_wait an upstream recorded.
func holdEvents(t *testing.T, record, event string) int {
	t.Helper()
	n := 0
	for _, m := range fwdRecorded(t, record) {
		if m["event"] == event && m["tool"] == "elicit_wait" {
			n++
		}
	}
	return n
}

// TestE2ELogLevel: the client's log level reaches upstreams at both
// revisions, for clients at both revisions: a 2026-07-28 request's _meta
// level and a 2025-11-25 session's logging/setLevel travel in each call's
// _meta (an upstream at 2026-07-28 has no logging/setLevel), and lower a
// 2025-11-25 upstream's session level. A 2026-07-28 request without a
// level gets no log messages.
func TestE2ELogLevel(t *testing.T) {
	t.Parallel()
	srv := startHTTP(t, "--config", mrtrConfig(t, "direct"))
	ctx := context.Background()
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		c := newFwdClient("l" + strings.ReplaceAll(rev, "-", ""))
		c.so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
		c.connectHTTP(t, srv, false)
		c.waitTools(t, "new__log", "old__log")
		var meta mcp.Meta
		if rev < "2026-07-28" {
			if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}
		} else {
			// Without a level: nothing is logged to this request.
			for _, up := range []string{"new", "old"} {
				if _, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: up + "__log", Arguments: map[string]any{"level": "error", "message": "unwanted " + up}}); err != nil {
					t.Fatal(err)
				}
			}
			meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
		}
		for _, up := range []string{"new", "old"} {
			msg := fmt.Sprintf("log of %s via %s", c.name, up)
			res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: up + "__log", Arguments: map[string]any{"level": "warning", "message": msg}, Meta: meta})
			if err != nil || res.IsError {
				t.Fatalf("%s client, %s upstream: %+v %v", rev, up, res, err)
			}
			// Below the client's level: filtered.
			if _, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: up + "__log", Arguments: map[string]any{"level": "debug", "message": "debug " + msg}, Meta: meta}); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"log of " + c.name + " via new", "log of " + c.name + " via old"}
		deadline := time.Now().Add(fwdTimeout)
		for {
			_, _, _, logs := c.seen()
			var got []string
			for _, l := range logs {
				got = append(got, fmt.Sprint(l.Data))
			}
			slices.Sort(got)
			if slices.Equal(got, want) {
				break
			}
			if len(got) > len(want) || time.Now().After(deadline) {
				t.Fatalf("%s client: logs %q, want %q\n%s", rev, got, want, srv.log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestE2EPerClientRevision: a per-client upstream session speaks its
// client's revision: an upstream that would negotiate 2026-07-28, whose
// tool sends an elicitation in the middle of the call (which its SDK
// refuses at 2026-07-28), works for a 2025-11-25 client through
// sessions: per_client, with no protocol pin.
func TestE2EPerClientRevision(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, fmt.Appendf(nil, "mode: direct\nenvironment: dev\nstate_dir: %s\nupstreams:\n  - name: new\n    command: [%q, \"-extras\", \"-mrtr-tools\", \"-name\", \"new\"]\n    sessions: per_client\n",
		filepath.Join(dir, "state"), upstreamBin), 0o644))
	srv := startHTTP(t, "--config", cfg)
	c := newFwdClient("pc")
	c.connectHTTP(t, srv, true)
	c.waitTools(t, "new__elicit", "new__sample")
	if text, isErr, err := c.call(context.Background(), "new__elicit", map[string]any{"question": "q"}, nil); err != nil || isErr || !strings.Contains(text, `elicited: accept {"answer":"answer-of-pc to q"}`) {
		t.Fatalf("elicit: %q %v %v\n%s", text, isErr, err, srv.log())
	}
	if text, isErr, err := c.call(context.Background(), "new__sample", map[string]any{"prompt": "p"}, nil); err != nil || isErr || !strings.Contains(text, "sampled: model-pc answer-of-pc to p") {
		t.Fatalf("sample: %q %v %v", text, isErr, err)
	}
}

// TestE2EListChangedListen: a 2026-07-28 client's subscriptions/listen
// stream (the go-sdk client opens one when it has a list-changed handler)
// gets notifications/tools/list_changed when an upstream's tools change,
// in direct mode over stdio and HTTP.
func TestE2EListChangedListen(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			cfg, _ := directConfig(t, "direct", "", dUp{name: "alpha"})
			lc := &dListChanges{}
			var cs *mcp.ClientSession
			if transport == "stdio" {
				cs, _ = directStdio(t, lc.options(), "--config", cfg)
			} else {
				cs = directHTTP(t, startHTTP(t, "--config", cfg), lc.options())
			}
			if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				t.Fatalf("negotiated %s", v)
			}
			n := lc.count()
			if res, _ := callTool(t, cs, "alpha__add_tool", map[string]any{"name": "zeta"}); res.IsError {
				t.Fatalf("add_tool: %s", dJSON(t, res))
			}
			deadline := time.Now().Add(fwdTimeout)
			for lc.count() == n {
				if time.Now().After(deadline) {
					t.Fatal("no tools/list_changed reached the listen stream")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
