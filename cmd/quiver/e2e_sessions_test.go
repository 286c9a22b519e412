//lint:file-ignore SA1019 sampling is deprecated in protocol 2026-07-28 only; these tests forward it for the protocols that have it.

package main

import (
	"context"
	"fmt"
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

// TestE2EPerClientSessionsEnd shows the lifecycle of per-client upstream
// sessions over HTTP: each client session gets a child process of its own
// on its first call, the shared session (listing) keeps its own, and a
// client that terminates its session (DELETE) takes its child with it
// while the other client's keeps serving.
func TestE2EPerClientSessionsEnd(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "calls.jsonl")
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`mode: direct
environment: dev
state_dir: %s
upstreams:
  - name: up
    command: [%q, "-name", "up", "-record", %q]
    sessions: per_client
`, filepath.Join(dir, "state"), upstreamBin, record)), 0o644))
	srv := startHTTP(t, "--config", cfg)

	call := func(cs *mcp.ClientSession) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("up__echo: %v %+v\n%s", err, res, srv.log())
		}
	}
	a, b := srv.sessionAt(t, legacySession()), srv.sessionAt(t, legacySession())
	call(a)
	pidsA := upstreamPIDs(t, record)
	call(b)
	pids := upstreamPIDs(t, record)
	if len(pidsA) != 1 || len(pids) != 2 {
		t.Fatalf("children that answered: after A %v, after A and B %v; want one per client", pidsA, pids)
	}
	pidB := pids[1]
	if pids[0] != pidsA[0] {
		pidB = pids[0]
	}
	call(a) // A's calls stay on A's child
	if got := upstreamPIDs(t, record); len(got) != 2 {
		t.Fatalf("A's second call started another child: %v", got)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for alive(pidsA[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("A's child %d outlived A's session\n%s", pidsA[0], srv.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !alive(pidB) {
		t.Fatalf("B's child %d ended with A's session", pidB)
	}
	call(b)
	if got := upstreamPIDs(t, record); !slices.Contains(got, pidB) || len(got) != 2 {
		t.Fatalf("B's call after A left: children %v", got)
	}
}

// TestE2EMultiRoundTripUpstreamShared: an upstream on protocol 2026-07-28
// asks for input with an input-required result instead of a request of its
// own; quiver's client fulfils it on the context of the call that got it,
// so even on one shared upstream session each of two clients calling at
// the same time is asked its own question.
func TestE2EMultiRoundTripUpstreamShared(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`mode: direct
environment: dev
state_dir: %s
upstreams:
  - name: up
    command: [%q, "-name", "up", "-extras"]
`, filepath.Join(dir, "state"), upstreamBin)), 0o644))
	srv := startHTTP(t, "--config", cfg)

	client := func(name string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if !strings.Contains(req.Params.Message, name) {
					return nil, fmt.Errorf("client %s was asked %q", name, req.Params.Message)
				}
				// Hold the answer a moment so that both calls are in flight
				// on the shared upstream session together.
				time.Sleep(100 * time.Millisecond)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "from " + name}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url}, legacySession())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	sessions := map[string]*mcp.ClientSession{"alice": client("alice"), "bob": client("bob")}
	var wg sync.WaitGroup
	for name, cs := range sessions {
		wg.Go(func() {
			for i := range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__ask", Arguments: map[string]any{"question": fmt.Sprintf("%s, round %d?", name, i)}})
				cancel()
				if err != nil || res.IsError {
					t.Errorf("%s: %v %s", name, err, sessionResultText(res))
					return
				}
				if got, want := sessionResultText(res), `asked: accept {"answer":"from `+name+`"}`; got != want {
					t.Errorf("%s got %q, want %q", name, got, want)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.Log(srv.log())
	}
}

func sessionResultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestE2EGatewayForwards: forwarding is not a direct-mode feature. Through
// tool_execute in gateway mode, the upstream's sampling request reaches the
// calling client, and its progress arrives under the client's own token.
func TestE2EGatewayForwards(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`mode: gateway
environment: dev
state_dir: %s
upstreams:
  - name: up
    command: [%q, "-name", "up", "-extras", "-max-protocol", "2025-11-25"]
`, filepath.Join(dir, "state"), upstreamBin)), 0o644))
	var mu sync.Mutex
	var tokens []any
	c := mcp.NewClient(&mcp.Implementation{Name: "gw", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "gw-model", Role: "assistant", Content: &mcp.TextContent{Text: "gateway answer"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			tokens = append(tokens, req.Params.ProgressToken)
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(quiverBin, "serve", "--config", cfg)
	cmd.Stderr = testWriter{t}
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, legacySession())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ids := toolIDs(t, cs, "up")

	res, env := callTool(t, cs, "tool_execute", map[string]any{"tool_id": ids["up/sample"], "args": map[string]any{"prompt": "hello"}})
	if res.IsError || !strings.Contains(dJSON(t, env), "sampled: gw-model gateway answer") {
		t.Fatalf("tool_execute sample: %s", dJSON(t, res))
	}

	params := &mcp.CallToolParams{Name: "tool_execute", Arguments: map[string]any{"tool_id": ids["up/progress"], "args": map[string]any{"steps": 3}}}
	params.SetProgressToken("client-token-7")
	if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("tool_execute progress: %v %s", err, dJSON(t, res))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(tokens)
		mu.Unlock()
		if len(got) > 0 {
			for _, tok := range got {
				if tok != "client-token-7" {
					t.Fatalf("progress arrived with token %v, want the client's", tok)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress notification reached the client")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EIdleSessionReleasesUpstream: an HTTP client that goes quiet
// without ending its session (no DELETE) has it closed after
// listen.session_idle_timeout, and its per-client upstream process with it.
func TestE2EIdleSessionReleasesUpstream(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "calls.jsonl")
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`mode: direct
environment: dev
state_dir: %s
listen: {session_idle_timeout: 1s}
upstreams:
  - name: up
    command: [%q, "-name", "up", "-record", %q]
    sessions: per_client
`, filepath.Join(dir, "state"), upstreamBin, record)), 0o644))
	srv := startHTTP(t, "--config", cfg)
	cs := srv.sessionAt(t, legacySession())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"text": "hi"}}); err != nil || res.IsError {
		t.Fatalf("up__echo: %v", err)
	}
	pid := upstreamPIDs(t, record)[0]
	deadline := time.Now().Add(15 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the per-client upstream %d outlived its idle session\n%s", pid, srv.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
