package upstream

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

// TestReapAndNoLeaks is deliberately not parallel: it compares the number
// of goroutines before and after whole client lifetimes.
func TestReapAndNoLeaks(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")

	cases := []struct {
		name string
		spec func(t *testing.T) Spec
	}{
		{"stdio", func(*testing.T) Spec { return stdioSpec("leak", "-record", rec) }},
		{"stdio ignoring stdin close and SIGTERM", func(*testing.T) Spec {
			return stdioSpec("stubborn", "-linger", "-ignore-sigterm", "-record", rec)
		}},
		{"http", func(t *testing.T) Spec {
			return Spec{Name: "leakh", URL: startServer(t, "http", "", "-record", rec).URL, HealthInterval: 50 * time.Millisecond}
		}},
		{"sse", func(t *testing.T) Spec {
			return Spec{Name: "leaks", SSE: startServer(t, "sse", "", "-record", rec).URL}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec(t) // starts an HTTP server first, with its own goroutines
			base := runtime.NumGoroutine()
			spec.CallTimeout = 30 * time.Second
			c := New(spec, Options{OnListChanged: func(string) {}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			waitReady(t, c)
			pid := c.State().PID
			if _, err := c.ListTools(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Leave a call hanging across the shutdown.
			hangErr := make(chan error, 1)
			go func() {
				_, err := c.CallTool(context.Background(), "hang", nil)
				hangErr <- err
			}()
			waitFor(t, "hang to reach the upstream", 5*time.Second, func() bool { return hasRecord(t, rec, "call", "hang") })
			time.Sleep(50 * time.Millisecond)

			begin := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			t.Logf("Run returned %v after cancel", time.Since(begin))
			select {
			case err := <-hangErr:
				wantCode(t, err, codes.UpstreamUnavailable)
			case <-time.After(time.Second):
				t.Fatal("the in-flight call outlived Run")
			}
			if spec.Command != nil {
				assertReaped(t, pid)
			}
			if err := removeRecords(rec); err != nil {
				t.Fatal(err)
			}
			// Every goroutine the client started is gone, while the upstream
			// (and so any connection to it) is still up.
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > base {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d before, %d after\n%s", base, n, filterStacks(string(buf)))
			}
		})
	}
}

func removeRecords(path string) error {
	return writeFile(path, nil)
}

// filterStacks drops the testing framework's own goroutines from a dump.
func filterStacks(dump string) string {
	var keep []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "testing.(*T).Run") || strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "upstream") {
			continue
		}
		keep = append(keep, g)
	}
	return strings.Join(keep, "\n\n")
}
