package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// serverBin is the test upstream built once by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "quiver-upstream-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBin = filepath.Join(dir, "upstream")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	build := exec.Command(goBin, "build", "-o", serverBin, "../../testdata/upstream")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test upstream: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// logSink is an slog handler that keeps records for assertions.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() *slog.Logger {
	return slog.New(&sinkHandler{sink: s})
}

func (s *logSink) contains(substr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

type sinkHandler struct {
	sink  *logSink
	attrs []slog.Attr
}

func (h *sinkHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *sinkHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.sink.mu.Lock()
	h.sink.lines = append(h.sink.lines, b.String())
	h.sink.mu.Unlock()
	return nil
}

func (h *sinkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &sinkHandler{sink: h.sink, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *sinkHandler) WithGroup(string) slog.Handler { return h }

// stdioSpec returns a spec running the test upstream over stdio.
func stdioSpec(name string, args ...string) Spec {
	return Spec{
		Name:           name,
		Command:        append([]string{serverBin, "-transport", "stdio", "-name", name}, args...),
		ConnectTimeout: 10 * time.Second,
		CallTimeout:    10 * time.Second,
		TerminateGrace: 200 * time.Millisecond,
	}
}

// httpServer is a test upstream running as a subprocess over HTTP or SSE.
type httpServer struct {
	URL  string
	cmd  *exec.Cmd
	once sync.Once
}

// startServer starts the test upstream with -transport transport ("http"
// or "sse") on addr (127.0.0.1:0 when empty) and returns its endpoint.
func startServer(t *testing.T, transport, addr string, args ...string) *httpServer {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	cmd := exec.Command(serverBin, append([]string{"-transport", transport, "-addr", addr}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("test upstream did not print its URL: %v\n%s", err, stderr.String())
	}
	s := &httpServer{URL: strings.TrimSpace(line), cmd: cmd}
	t.Cleanup(s.kill)
	return s
}

// kill kills the server process and reaps it (idempotent).
func (s *httpServer) kill() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}

// freeAddr returns a currently free 127.0.0.1 port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// running is a Client whose Run executes in a goroutine owned by the test.
type running struct {
	*Client
	cancel context.CancelFunc
	done   chan error
}

// start runs c until the test ends.
func start(t *testing.T, c *Client) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Client: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		if err := r.stop(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return r
}

// stop cancels Run and waits for it to return.
func (r *running) stop(within time.Duration) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			return fmt.Errorf("Run returned %w", err)
		}
		if ok {
			close(r.done)
		}
		return nil
	case <-time.After(within):
		return fmt.Errorf("Run did not return within %v", within)
	}
}

func waitReady(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// record is one line of the test upstream's -record file.
type record struct {
	Event   string              `json:"event"`
	Tool    string              `json:"tool"`
	Args    map[string]any      `json:"args"`
	Headers map[string][]string `json:"headers"`
	PID     int                 `json:"pid"`
}

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("bad record line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func hasRecord(t *testing.T, path, event, tool string) bool {
	for _, r := range readRecords(t, path) {
		if r.Event == event && r.Tool == tool {
			return true
		}
	}
	return false
}

// wantCode fails the test unless err is an *Error with the given code.
func wantCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error %s, got %T %v", code, err, err)
	}
	if e.Code != code {
		t.Fatalf("want code %s, got %s (%v)", code, e.Code, err)
	}
	return e
}

func writeFile(path string, data []byte) error {
	return os.WriteFile(path, data, 0o644)
}
