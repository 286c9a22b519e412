package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	a, b := srv.session(t), srv.session(t)
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
