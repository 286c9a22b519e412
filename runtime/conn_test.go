package runtime

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// recordingTracker is a callTracker that records the calls it is told of.
type recordingTracker struct {
	mu    sync.Mutex
	begun []string // server/toolID
	ended int
}

func (r *recordingTracker) begin(ctx context.Context, _ *upstream.Client, server, toolID string) (context.Context, string, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begun = append(r.begun, server+"/"+toolID)
	return ctx, "p1", func() {
		r.mu.Lock()
		r.ended++
		r.mu.Unlock()
	}
}

// TestLiveConnWithoutRuntime builds a liveConn from a supervised client and
// its two hooks, with no Runtime: it lists, calls through the shared
// session registering each call with the tracker, and asks perClient for
// the session of a caller that has a downstream session only.
func TestLiveConnWithoutRuntime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	spec := upstream.Spec{Name: "alpha", Command: []string{upstreamBin, "-name", "alpha"},
		ConnectTimeout: 10 * time.Second, TerminateGrace: 200 * time.Millisecond}
	uc := upstream.New(spec, upstream.Options{Logger: slog.New(slog.DiscardHandler)})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = uc.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	if err := uc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	tr := &recordingTracker{}
	l := liveConn{c: uc, spec: spec, relay: tr}

	src, err := l.listing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(src.Tools, func(d catalog.ToolDef) bool { return d.Name == "echo" && d.Server == "alpha" }) {
		t.Fatalf("listing has no alpha/echo: %+v", src.Tools)
	}

	it := &catalog.Item{Server: "alpha", ID: "alpha:echo", UpstreamName: "echo"}
	res, err := l.callTool(ctx, it, map[string]any{"text": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "hi" {
		t.Fatalf("echo result %+v", res.Content)
	}
	tr.mu.Lock()
	if !slices.Equal(tr.begun, []string{"alpha/alpha:echo"}) || tr.ended != 1 {
		t.Fatalf("tracker saw %v, ended %d", tr.begun, tr.ended)
	}
	tr.mu.Unlock()

	var asked *caller
	errNoSession := errors.New("no per-client session")
	l.perClient = func(_ context.Context, _ liveConn, c *caller) (*upstream.Client, error) {
		asked = c
		return nil, errNoSession
	}
	// A caller without a downstream session (or none at all) shares the
	// upstream session.
	if _, err := l.callTool(withCaller(ctx, &caller{}), it, map[string]any{"text": "shared"}); err != nil || asked != nil {
		t.Fatalf("shared call: %v, perClient asked for %+v", err, asked)
	}
	who := &caller{ss: &mcp.ServerSession{}}
	if _, err := l.callTool(withCaller(ctx, who), it, map[string]any{"text": "own"}); !errors.Is(err, errNoSession) || asked != who {
		t.Fatalf("per-client call: %v, perClient asked for %+v", err, asked)
	}
}
