package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// reloadFiles writes the two policies of the reload test and returns the
// config writer: upstreams is the YAML list of upstreams, policyFile the
// policy in force, extra more top-level YAML.
func reloadFiles(t *testing.T) (dir string, write func(upstreams, policyFile, extra string)) {
	t.Helper()
	dir = t.TempDir()
	for name, servers := range map[string]string{"p1.yaml": "[alpha, gone, math]", "p2.yaml": "[alpha, beta]"} {
		p := fmt.Sprintf("policy_id: %s\nrules:\n  - id: servers\n    effect: allow\n    match: {server: %s}\n", strings.TrimSuffix(name, ".yaml"), servers)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "quiver.yaml")
	write = func(upstreams, policyFile, extra string) {
		t.Helper()
		body := fmt.Sprintf("environment: dev\nstate_dir: %s\npolicy: {file: %s}\n%supstreams:\n%s", filepath.Join(dir, "state"), filepath.Join(dir, policyFile), extra, upstreams)
		// Written aside and renamed: the watch never reads half a file.
		tmp := cfg + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return dir, write
}

func liveEntry(name string) string {
	return fmt.Sprintf("  - name: %s\n    command: [%q, \"-name\", %q]\n", name, upstreamBin, name)
}

// waitLog waits until the log has n lines containing all of want.
func waitLog(t *testing.T, srv *httpServer, n int, want ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		count := 0
		for _, line := range strings.Split(srv.log(), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				count++
			}
		}
		if count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d log lines with %q\n%s", n, want, srv.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2EReloadUnderLoad: a client calls alpha's add in a loop while the
// configuration changes under it: an upstream added (beta), one removed
// (gone), the policy file replaced; then a broken file, which is logged
// and changes nothing; then SIGHUP with a change of listen, which is
// reported and kept. No call that both configurations allow fails, and
// the session never drops.
func TestE2EReloadUnderLoad(t *testing.T) {
	fleet := mustAbs(t, "../../runtime/testdata/fleet.json")
	static := fmt.Sprintf("  - name: fleet\n    catalog: %q\n", fleet)
	dir, write := reloadFiles(t)
	// A long ready_timeout: a reload waits for beta however loaded the
	// machine is.
	slow := "listen: {ready_timeout: 120s}\n"
	write(liveEntry("alpha")+liveEntry("gone")+static, "p1.yaml", slow)
	srv := startHTTP(t, "--config", filepath.Join(dir, "quiver.yaml"))
	cs := srv.session(t)
	if _, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": "gone:echo"}); h["id"] == nil {
		t.Fatalf("gone:echo at start: %v", h)
	}
	if _, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": "math:add"}); h["id"] == nil {
		t.Fatalf("math:add at start: %v", h)
	}

	// The load: alpha:add, which every configuration below allows.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var calls int
	var failures []string
	wg.Go(func() {
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			res, env := execute(t, cs, "alpha:add", map[string]any{"a": i, "b": 1})
			mu.Lock()
			calls++
			if res.IsError {
				failures = append(failures, fmt.Sprint(env))
			} else if sc := env["result"].(map[string]any)["structuredContent"].(map[string]any); sc["sum"] != float64(i+1) {
				failures = append(failures, fmt.Sprintf("%d+1 = %v", i, sc))
			}
			mu.Unlock()
		}
	})
	callsSoFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
	// moreCalls waits until the loop made n more calls.
	moreCalls := func(n int) {
		t.Helper()
		start := callsSoFar()
		deadline := time.Now().Add(60 * time.Second)
		for callsSoFar() < start+n {
			if time.Now().After(deadline) {
				t.Fatalf("the call loop stalled at %d calls", callsSoFar())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	moreCalls(20)

	// 1. The file changes: beta added, gone removed, policy p2.
	write(liveEntry("alpha")+liveEntry("beta")+static, "p2.yaml", slow)
	waitLog(t, srv, 1, "configuration reloaded", "trigger=file", "added beta", "removed gone", "policy p2")
	moreCalls(20)
	if _, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": "beta:echo"}); h["id"] == nil {
		t.Fatalf("beta:echo after the reload: %v", h)
	}
	for _, gone := range []string{"gone:echo", "math:add"} {
		// gone is no longer configured; math is no longer allowed.
		if res, m := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": gone}); !res.IsError || m["error"] != "HYDRATE_FAILED" {
			t.Fatalf("%s after the reload: %v", gone, m)
		}
	}

	// 2. A broken file: logged in one line, nothing changes.
	os.WriteFile(filepath.Join(dir, "quiver.yaml"), []byte("upstreams: [\n"), 0o644)
	waitLog(t, srv, 1, "configuration not reloaded; the configuration in force stays", "trigger=file")
	moreCalls(20)
	if _, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": "beta:echo"}); h["id"] == nil {
		t.Fatalf("beta:echo after a broken file: %v", h)
	}

	// 3. SIGHUP with the good file back and listen changed: reloaded,
	// listen reported and kept.
	write(liveEntry("alpha")+liveEntry("beta")+static, "p2.yaml", "listen: {ready_timeout: 3s}\n")
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, srv, 1, "configuration reloaded", "trigger=hangup")
	waitLog(t, srv, 1, "configuration changes that need a restart were not applied", "settings=listen")
	moreCalls(20)

	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls failed under reload, e.g. %s", len(failures), calls, failures[0])
	}
	srv.stop(t, syscall.SIGTERM)
}

// TestE2EReloadWithoutFile: quiver serving a --catalog has no file to
// reload; SIGHUP is logged and the process serves on.
func TestE2EReloadWithoutFile(t *testing.T) {
	srv := startHTTP(t, "--gateway", "--catalog", mustAbs(t, "../../runtime/testdata/fleet.json"))
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, srv, 1, "reload requested, but quiver serves without a configuration file")
	if id := browseFirst(t, srv.session(t), "weather forecast"); !strings.HasPrefix(id, "weather:") {
		t.Fatalf("after SIGHUP: %s", id)
	}
	srv.stop(t, syscall.SIGTERM)
}
