package reload

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/runtime/config"
)

// recorder is a Target that records the configurations applied.
type recorder struct {
	mu      sync.Mutex
	applied []string
	fail    error
	kept    []string
}

func (r *recorder) Apply(_ context.Context, c *config.Config) (runtime.Applied, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return runtime.Applied{}, r.fail
	}
	r.applied = append(r.applied, string(c.Mode))
	return runtime.Applied{Registry: "sha256:x", Kept: r.kept}, nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applied)
}

// syncBuf is a log sink safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventually polls cond (no timing assertion: only a bound on the wait).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRun: a signal reloads; a changed file reloads once it holds still;
// a file that does not load, or a configuration Apply refuses, is one log
// line and nothing is applied; settings kept are logged.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "quiver.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("mode: gateway\n")
	target := &recorder{kept: []string{"listen"}}
	logs := &syncBuf{}
	sig := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		Run(ctx, target, Options{File: file, Load: func() (*config.Config, error) { return config.Load(file) }, Signals: sig,
			Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	})
	defer func() {
		cancel()
		wg.Wait()
	}()

	sig <- syscall.SIGHUP
	eventually(t, "a reload on SIGHUP", func() bool { return target.count() == 1 })
	eventually(t, "its log line", func() bool { return strings.Contains(logs.String(), "trigger=hangup") })
	if !strings.Contains(logs.String(), "settings=listen") {
		t.Fatalf("kept settings not logged:\n%s", logs)
	}

	// Mode differs, so the content differs; mtime may not (coarse clocks).
	write("mode: proxy\n")
	eventually(t, "a reload on the file change", func() bool { return target.count() == 2 })

	write("mode: [\n")
	eventually(t, "the broken file logged", func() bool {
		return strings.Contains(logs.String(), "configuration not reloaded; the configuration in force stays")
	})
	if target.count() != 2 {
		t.Fatalf("a broken file was applied")
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "configuration not reloaded") {
			line = l
		}
	}
	if !strings.Contains(line, "trigger=file") || !strings.Contains(line, "quiver.yaml") {
		t.Fatalf("the refusal names neither trigger nor file: %s", line)
	}

	target.mu.Lock()
	target.fail = errors.New("upstream \"x\": no such credential")
	target.mu.Unlock()
	sig <- syscall.SIGHUP
	write("mode: gateway\n")
	eventually(t, "the refused Apply logged", func() bool { return strings.Contains(logs.String(), "no such credential") })
	if target.count() != 2 {
		t.Fatalf("a refused configuration counted as applied")
	}
}
