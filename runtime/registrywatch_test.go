package runtime

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// String returns what was written.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryWatch: a manifest file changed on disk is pinned by the
// watch (a valid one swapped in, the connector and, after the rebuild it
// asks for, the front door agreeing), an invalid one fails the connector
// at once with a log line, and a fixed one is pinned again.
func TestRegistryWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "alpha.json")
	writeFile(t, path, alphaManifest)
	logs := &syncBuffer{}
	rt, cs, _ := guardedAlpha(t, func(o *rig) {
		o.deps.Registry = nil
		o.cfg.Registry = []string{filepath.Join(dir, "*.json")}
		o.deps.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	first := rt.connector().Pinned().Version()
	add := idOf(t, rt, "alpha", "add")
	if res, env := runExec(t, cs, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 1}}); res.IsError {
		t.Fatalf("before: %v", env)
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s\n%s", what, logs.String())
			}
		}
	}
	// Valid: echo's document limit changes.
	writeFile(t, path, strings.Replace(alphaManifest, `"max_write_bytes":16`, `"max_write_bytes":32`, 1))
	wait("the valid change is not pinned", func() bool {
		v := rt.connector().Pinned().Version()
		return v != first && rt.state.Load().gate.Version() == v
	})
	second := rt.connector().Pinned().Version()
	if res, env := runExec(t, cs, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 1}}); res.IsError {
		t.Fatalf("after the valid change: %v", env)
	}
	// Invalid: refused at once, one log line.
	writeFile(t, path, `{"schema_id":"talos.mcp.tool_registry"}`)
	wait("the invalid change does not fail the connector", func() bool { return rt.connector().Pinned().Version() == "unavailable" })
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 1}}, CodeRegistryVersionMismatch)
	if n := strings.Count(logs.String(), "the tool registry on disk is invalid"); n != 1 {
		t.Fatalf("%d log lines for the invalid registry:\n%s", n, logs.String())
	}
	// Fixed.
	writeFile(t, path, alphaManifest)
	wait("the fixed registry is not pinned", func() bool {
		v := rt.connector().Pinned().Version()
		return v == first && rt.state.Load().gate.Version() == v
	})
	if second == first {
		t.Fatal("the valid change kept the version")
	}
	if res, env := runExec(t, cs, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 1}}); res.IsError {
		t.Fatalf("after the fix: %v", env)
	}
}
