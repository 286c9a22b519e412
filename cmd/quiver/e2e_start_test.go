package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startConfig writes a config whose upstreams are a command that does not
// exist ("missing"), one that never answers the handshake ("hang": it
// reads its stdin and says nothing, and connect_timeout is an hour), the
// live test upstream ("alpha") and the static fleet. readyTimeout is
// listen.ready_timeout.
func startConfig(t *testing.T, readyTimeout string) string {
	t.Helper()
	dir := t.TempDir()
	// /healthz names the upstreams to the holder of the metrics token.
	t.Setenv("QUIVER_E2E_METRICS_TOKEN", startMetricsToken)
	cfg := fmt.Sprintf(`environment: dev
state_dir: %s
listen: {ready_timeout: %s, metrics_token_env: QUIVER_E2E_METRICS_TOKEN}
upstreams:
  - name: missing
    command: [%q]
    connect_timeout: 1h
  - name: hang
    command: [sh, -c, "while read -r line; do :; done"]
    connect_timeout: 1h
  - name: alpha
    command: [%q, "-name", "alpha"]
  - name: fleet
    catalog: %q
`, filepath.Join(dir, "state"), readyTimeout, filepath.Join(dir, "no-such-mcp-server"), upstreamBin, mustAbs(t, "../../runtime/testdata/fleet.json"))
	path := filepath.Join(dir, "quiver.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startMetricsToken opens /healthz's detail in the start-up tests.
const startMetricsToken = "e2e-metrics-token-of-at-least-32-bytes!"

// healthz reads /healthz: its status and each upstream's state and error.
func healthz(t *testing.T, srv *httpServer) (status string, states, errs map[string]string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+startMetricsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Status    string
		Upstreams []struct{ Name, State, Error string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz %d: %v", resp.StatusCode, err)
	}
	states, errs = map[string]string{}, map[string]string{}
	for _, u := range h.Upstreams {
		states[u.Name], errs[u.Name] = u.State, u.Error
	}
	return h.Status, states, errs
}

// TestE2EStartDoesNotWaitForUpstreams: with an upstream that never comes
// up and one whose command does not exist, quiver listens, answers
// /healthz and initialize before the hanging upstream gives up (it cannot:
// its connect_timeout and listen.ready_timeout are an hour), and /healthz
// tells each upstream's state from the start.
func TestE2EStartDoesNotWaitForUpstreams(t *testing.T) {
	cfg := startConfig(t, "1h")
	t.Run("http", func(t *testing.T) {
		srv := startHTTP(t, "--config", cfg)
		// Before any session: the first catalog is not published (hang
		// is still starting), yet healthz answers.
		status, states, errs := healthz(t, srv)
		if status != "starting" || states["hang"] != "starting" {
			t.Fatalf("healthz at start: %s %v %v", status, states, errs)
		}
		srv.sessionAt(t, legacySession()) // initialize answered
		// Order of events: the handshake is done while the hanging
		// upstream is still starting and the first catalog is not out.
		status, states, errs = healthz(t, srv)
		if status != "starting" || states["hang"] != "starting" {
			t.Fatalf("after initialize: %s %v %v", status, states, errs)
		}
		// The other upstreams reach their states while hang hangs.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, states, errs := healthz(t, srv)
			if states["missing"] == "failed" && states["alpha"] == "ready" {
				if !strings.Contains(errs["missing"], "no-such-mcp-server") {
					t.Fatalf("missing failed without its reason: %q", errs["missing"])
				}
				if states["hang"] != "starting" {
					t.Fatalf("hang is %s", states["hang"])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("upstream states never settled: %v %v\n%s", states, errs, srv.log())
			}
			time.Sleep(50 * time.Millisecond)
		}
		srv.stop(t, syscall.SIGTERM)
	})
	t.Run("stdio", func(t *testing.T) {
		// stdioSession fails unless initialize is answered within 30 s.
		cs := stdioSession(t, "--config", cfg)
		if err := cs.Ping(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	})
}

// TestE2EStartAnswersFromWhatIsReady: once listen.ready_timeout passes,
// tool_browse answers from the upstreams that are up and says which are
// still starting or failed, and the log names them.
func TestE2EStartAnswersFromWhatIsReady(t *testing.T) {
	srv := startHTTP(t, "--config", startConfig(t, "1s"))
	cs := srv.session(t)
	// Each answer tells the states of that moment: browse until alpha is
	// up and missing has failed (hang never comes up).
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, m := callTool(t, cs, "tool_browse", map[string]any{"query": "add two numbers; weather forecast", "top_k": 10})
		if res.IsError {
			t.Fatalf("browse: %v", m)
		}
		var ids []string
		for _, c := range m["cards"].([]any) {
			ids = append(ids, c.(map[string]any)["id"].(string))
		}
		if !strings.Contains(strings.Join(ids, " "), "weather:") {
			t.Fatalf("the static fleet is missing: %v", ids)
		}
		notes := map[string]string{}
		for _, n := range m["upstreams_not_ready"].([]any) {
			n := n.(map[string]any)
			notes[n["name"].(string)] = n["state"].(string)
		}
		if notes["hang"] != "starting" {
			t.Fatalf("upstreams_not_ready = %v", notes)
		}
		if notes["missing"] == "failed" && notes["alpha"] == "" {
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "still starting: hang") || !strings.Contains(text, "failed: missing") {
				t.Fatalf("browse text does not say what is missing:\n%s", text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstreams_not_ready = %v\n%s", notes, srv.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The line is written when the first catalog is built, which may
	// come after a browse answered from what was ready.
	for deadline := time.Now().Add(30 * time.Second); ; {
		log := srv.log()
		if strings.Contains(log, "upstream not ready at the first catalog") && strings.Contains(log, "upstream=hang") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line names the upstream still starting:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv.stop(t, syscall.SIGTERM)
}

// TestE2EBusyPortFailsFirst: a busy HTTP port is one line and exit 2,
// before any upstream starts: the upstream's command, which would leave a
// marker file, never ran.
func TestE2EBusyPortFailsFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	cfg := filepath.Join(dir, "quiver.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`environment: dev
state_dir: %s
upstreams:
  - name: marker
    command: [sh, -c, "touch %s; exec %s -name marker"]
`, filepath.Join(dir, "state"), marker, upstreamBin)), 0o644)
	out, err := exec.Command(quiverBin, "serve", "--config", cfg, "--http", ln.Addr().String()).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "quiver: listen.addr "+ln.Addr().String()) || !strings.Contains(last, "address already in use") {
		t.Fatalf("last line %q\n%s", last, out)
	}
	if strings.Contains(string(out), "upstream") {
		t.Fatalf("an upstream was mentioned before the port failed:\n%s", out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the upstream's command ran (marker: %v)", err)
	}
}
