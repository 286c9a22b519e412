package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/sandbox"
	"github.com/quiver-mcp/quiver/runtime/units"
	"github.com/quiver-mcp/quiver/toolid"
)

// SandboxResult is the cost of running one stdio upstream (the
// testdata/upstream binary) in a given sandbox mode: start-up and
// small-call latency through an in-process quiver runtime.
type SandboxResult struct {
	// Mode is off (no sandbox, minimal environment), bwrap (net: none)
	// or bwrap+proxy (net: an allowlist, so the egress proxy and the
	// in-sandbox forwarder run too).
	Mode string `json:"mode"`
	// Starts runtimes were started; StartP50Ms/StartMaxMs are the time
	// from runtime.New to a published catalog with the upstream listed.
	Starts     int     `json:"starts"`
	StartP50Ms float64 `json:"start_p50_ms"`
	StartMaxMs float64 `json:"start_max_ms"`
	// Calls tool_execute calls of echo {"text": "hello"} were timed.
	Calls int     `json:"calls"`
	P50Ms float64 `json:"call_p50_ms"`
	P99Ms float64 `json:"call_p99_ms"`
}

// RunSandbox measures, for each sandbox mode, starts start-ups of a
// runtime with one stdio upstream (bin, a testdata/upstream binary) and
// calls echo calls through the last one. The sandboxed modes need bwrap
// and a binary whose main calls sandbox.RunHelper (quiver itself); they
// are skipped, with a progress line, when the sandbox is unavailable.
func RunSandbox(ctx context.Context, bin string, starts, calls, warmup int, progress io.Writer) ([]SandboxResult, error) {
	say := progressFunc(progress)
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		return nil, fmt.Errorf("card builder: %w", err)
	}
	modes := []struct {
		name string
		sb   *config.Sandbox
	}{
		{"off", &config.Sandbox{Off: "benchmark baseline"}},
		{"bwrap", &config.Sandbox{}},
		{"bwrap+proxy", &config.Sandbox{Net: config.SandboxNet{Allow: []string{"example.org"}}}},
	}
	var out []SandboxResult
	for _, m := range modes {
		u := config.NewUpstream("sbx")
		u.Command, u.ConnectTimeout = []string{bin, "-name", "sbx"}, units.Duration(60*time.Second)
		u.Sandbox = m.sb
		if m.sb.Off == "" {
			if err := sandbox.New(sandbox.Options{}).Check(ctx, sandbox.Spec{Name: "sbx", Policy: u.SandboxPolicy()}); err != nil {
				say("sandbox %s: skipped: %v", m.name, err)
				continue
			}
		}
		say("sandbox %s: %d start-ups, %d echo calls", m.name, starts, calls)
		r := SandboxResult{Mode: m.name, Starts: starts, Calls: calls}
		var startups []time.Duration
		for i := range starts {
			last := i == starts-1
			d, lat, err := sandboxRun(ctx, cards, u, last, calls, warmup)
			if err != nil {
				return nil, fmt.Errorf("sandbox %s: %w", m.name, err)
			}
			startups = append(startups, d)
			if last {
				r.P50Ms, r.P99Ms = round(ms(percentile(lat, 0.50)), 3), round(ms(percentile(lat, 0.99)), 3)
			}
		}
		r.StartP50Ms, r.StartMaxMs = round(ms(percentile(startups, 0.50)), 1), round(ms(slices.Max(startups)), 1)
		say("  start p50 %.1f ms (max %.1f); call p50 %.3f ms p99 %.3f ms", r.StartP50Ms, r.StartMaxMs, r.P50Ms, r.P99Ms)
		out = append(out, r)
	}
	return out, nil
}

// sandboxRun starts a runtime with u, and when timed is set makes calls
// timed echo calls through it.
func sandboxRun(ctx context.Context, cards *choicecard.Builder, u config.Upstream, timed bool, calls, warmup int) (time.Duration, []time.Duration, error) {
	cfg := benchConfig(config.ModeGateway, guard.EnvDev, u)
	cfg.Timing.ReadyTimeout = 60 * time.Second
	t0 := time.Now()
	rt, err := runtime.New(cfg, runtime.Deps{Cards: cards, Logger: discardLogger()})
	if err != nil {
		return 0, nil, fmt.Errorf("runtime: %w", err)
	}
	defer rt.Close()
	err = rt.Start(ctx)
	if err == nil {
		err = rt.WaitPublished(ctx)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("runtime start: %w", err)
	}
	d := time.Since(t0)
	var id string
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		if it.UpstreamName == "echo" {
			id = it.ID
		}
	}
	if id == "" {
		return 0, nil, errors.New("the upstream did not come up")
	}
	if !timed {
		return d, nil, nil
	}
	cs, closeSession, err := connectInMemory(ctx, rt.Server())
	if err != nil {
		return 0, nil, err
	}
	defer closeSession()
	call := executeCall(cs, id, map[string]any{"text": "hello"})
	for range warmup {
		if err := call(ctx); err != nil {
			return 0, nil, err
		}
	}
	lat := make([]time.Duration, 0, calls)
	for range calls {
		s := time.Now()
		if err := call(ctx); err != nil {
			return 0, nil, err
		}
		lat = append(lat, time.Since(s))
	}
	return d, lat, nil
}
