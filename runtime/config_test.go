package runtime

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/controls"
	"github.com/quiver-mcp/quiver/runtime/guard"
)

// TestConfigControls: the guard and control blocks of a configuration
// reach the runtime, and none of them is reported as not enforced.
func TestConfigControls(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "registries"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "registries", "math.json"), []byte(strings.SplitN(fleetManifests, "\n{", 2)[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `environment: prod
registry: [registries/*.json]
retry: {max_attempts: 3, base_delay: 10ms, max_delay: 40ms, jitter: false, retryable_codes: [UPSTREAM_TIMEOUT]}
cache: {read_only: true, ttl: 5s, max_entries: 8, allow: ["math:*"]}
rate_limits:
  tool_execute: {max_calls_per_minute: 5}
  "tool:math:*": {max_calls_per_session: 2}
tolerant_args: true
principals: {alice: {read_only: true}, "*": {read_only: false}}
upstreams:
  - name: fleet
    catalog: ` + mustAbsPath(t, "testdata/fleet.json") + `
    workspace: {roots: [ws]}
    egress: {allow: [API.example.com], url_args: [url]}
`
	cfg, err := config.Parse("q.yaml", []byte(src), dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	rt, err := New(cfg, Deps{Cards: testCards(t), Getenv: func(string) (string, bool) { return "", false }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "not enforced") {
		t.Fatalf("controls reported as not enforced:\n%s", logs.String())
	}
	if rt.cfg.Environment != guard.EnvProd || !rt.cfg.TolerantArgs || !rt.cfg.Principals["alice"].ReadOnly || rt.cfg.Principals["*"].ReadOnly {
		t.Fatalf("cfg %+v", rt.cfg)
	}
	if rt.retry.MaxAttempts != 3 || rt.retry.BaseDelay != 10*time.Millisecond || rt.retry.Jitter || len(rt.retry.RetryableCodes) != 1 {
		t.Fatalf("retry %+v", rt.retry)
	}
	if u := rt.upstreams()[0]; u.workspace == nil || u.workspace.Roots[0] != filepath.Join(dir, "ws") || len(u.workspace.PathArgs) == 0 ||
		u.egress == nil || u.egress.Allow[0] != "api.example.com" || u.egress.URLArgs[0] != "url" {
		t.Fatalf("argument guards %+v %+v", u.workspace, u.egress)
	}
	if c := cacheOptions(rt.cfg); c == nil || rt.cache == nil || c.TTL != 5*time.Second || c.MaxEntries != 8 || c.Allow[0] != "math:*" {
		t.Fatalf("cache %+v", c)
	}
	if l := rateLimits(rt.cfg); l["tool_execute"] != (controls.Limit{PerMinute: 5}) || l["tool:math:*"] != (controls.Limit{PerSession: 2}) {
		t.Fatalf("rate limits %+v", l)
	}
	reg, err := rt.loadRegistry(rt.cfg.Registry, rt.upstreams())
	if err != nil || reg.ClassOf("math", "add") != guard.ClassRead {
		t.Fatalf("registry %v %v", reg, err)
	}
	// Unset, every control is off.
	plain, err := config.Parse("q.yaml", []byte("upstreams: []\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, err = New(plain, Deps{Cards: testCards(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err = rt.loadRegistry(rt.cfg.Registry, rt.upstreams())
	if err != nil {
		t.Fatal(err)
	}
	if cacheOptions(rt.cfg) != nil || rt.cache != nil || rateLimits(rt.cfg) != nil || rt.cfg.TolerantArgs || rt.retry.Enabled() || reg.Tools() != 0 || rt.cfg.Environment != guard.EnvProd {
		t.Fatalf("defaults %+v", rt.cfg)
	}
}

func mustAbsPath(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
