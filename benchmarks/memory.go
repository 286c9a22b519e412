package benchmarks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/units"

	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/toolid"
)

// MemoryProbeOptions configure one memory probe: a runtime serving a
// catalog sample as a static upstream, measured in a process of its own.
type MemoryProbeOptions struct {
	// Catalog is the catalog file.
	Catalog string `json:"catalog"`
	// Tools is the sample size (SampleByServer); 0 means the whole catalog.
	Tools int `json:"tools,omitempty"`
	// Scale > 1 serves a synthetic catalog Scale times the size (see
	// Synthesize) instead.
	Scale int `json:"scale,omitempty"`
	// Seed seeds the sample or the synthetic catalog.
	Seed uint64 `json:"seed"`
	// HeapProfile, when set, receives a heap profile taken after the
	// measurement.
	HeapProfile string `json:"heap_profile,omitempty"`
}

// MemoryResult is the outcome of one memory probe.
type MemoryResult struct {
	// ToolsRequested is the sample size asked for (tools of the file);
	// Tools is what the runtime served after ingest.
	ToolsRequested int `json:"tools_requested"`
	Tools          int `json:"tools"`
	Scale          int `json:"scale"`
	// RSSMB is the resident set (VmRSS) once the runtime is ready and a
	// garbage collection has run; PeakRSSMB the process's peak (VmHWM),
	// reached while ingesting and indexing.
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// SettledRSSMB is the resident set after debug.FreeOSMemory: what the
	// Go runtime's background scavenger brings RSS down to over the
	// following minutes, once the free pages left by start-up go back to
	// the OS.
	SettledRSSMB float64 `json:"settled_rss_mb"`
	// HeapLiveMB is the Go heap in use after that collection.
	HeapLiveMB float64 `json:"heap_live_mb"`
	// ReadyMs is runtime.New plus Start (ingest, router build), after the
	// catalog file was read.
	ReadyMs float64 `json:"ready_ms"`
}

// MemoryProbe loads a catalog sample into a runtime, starts it and
// measures the process's memory. Run it in a fresh process (RunMemory does):
// the figures are the whole process's.
func MemoryProbe(ctx context.Context, o MemoryProbeOptions) (MemoryResult, error) {
	src, err := loadSource(o.Catalog)
	if err != nil {
		return MemoryResult{}, err
	}
	r := MemoryResult{ToolsRequested: len(src.Tools), Scale: max(o.Scale, 1)}
	switch {
	case o.Scale > 1:
		src, _ = Synthesize(src, o.Scale, o.Seed)
		r.ToolsRequested = len(src.Tools)
	case o.Tools > 0:
		src = SampleByServer(src, o.Tools, o.Seed)
		r.ToolsRequested = min(o.Tools, r.ToolsRequested)
	}
	t0 := time.Now()
	rt, err := runtime.New(benchConfig(config.ModeGateway, guard.EnvProd, config.NewUpstream("catalog")),
		runtime.Deps{Logger: discardLogger(), Catalogs: map[string]catalog.Source{"catalog": src}})
	if err != nil {
		return r, fmt.Errorf("runtime: %w", err)
	}
	defer rt.Close()
	err = rt.Start(ctx)
	if err == nil {
		err = rt.WaitPublished(ctx)
	}
	if err != nil {
		return r, fmt.Errorf("runtime start: %w", err)
	}
	r.ReadyMs = round(ms(time.Since(t0)), 1)
	r.Tools = len(rt.Snapshot().Items(toolid.KindTool))
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	r.HeapLiveMB = round(float64(m.HeapAlloc)/(1<<20), 1)
	r.RSSMB = procStatusMB(0, "VmRSS")
	r.PeakRSSMB = procStatusMB(0, "VmHWM")
	debug.FreeOSMemory()
	r.SettledRSSMB = procStatusMB(0, "VmRSS")
	if o.HeapProfile != "" {
		f, err := os.Create(o.HeapProfile)
		if err != nil {
			return r, fmt.Errorf("heap profile: %w", err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return r, fmt.Errorf("heap profile: %w", err)
		}
	}
	goruntime.KeepAlive(rt)
	return r, nil
}

// RunMemoryProbe reads MemoryProbeOptions as JSON from in, runs
// MemoryProbe and writes its result as JSON to out: the child side of
// RunMemory.
func RunMemoryProbe(ctx context.Context, in io.Reader, out io.Writer) error {
	var o MemoryProbeOptions
	if err := json.NewDecoder(in).Decode(&o); err != nil {
		return fmt.Errorf("memory probe options: %w", err)
	}
	r, err := MemoryProbe(ctx, o)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(out).Encode(r); err != nil {
		return fmt.Errorf("memory probe result: %w", err)
	}
	return nil
}

// RunMemory runs one memory probe per entry of probes, each in a fresh
// process started with command (argv of a program that runs
// RunMemoryProbe, e.g. `quiver bench memprobe`).
func RunMemory(ctx context.Context, command []string, probes []MemoryProbeOptions, progress io.Writer) ([]MemoryResult, error) {
	say := progressFunc(progress)
	var out []MemoryResult
	for _, p := range probes {
		in, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("memory probe: %w", err)
		}
		what := fmt.Sprintf("%d tools", p.Tools)
		if p.Scale > 1 {
			what = fmt.Sprintf("x%d catalog", p.Scale)
		} else if p.Tools == 0 {
			what = "whole catalog"
		}
		say("memory: %s in a fresh process", what)
		cmd := exec.CommandContext(ctx, command[0], command[1:]...)
		cmd.Stdin = bytes.NewReader(in)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("memory probe (%s): %w: %s", what, err, bytes.TrimSpace(stderr.Bytes()))
		}
		var r MemoryResult
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("memory probe (%s) output %q: %w", what, stdout.String(), err)
		}
		say("  %d tools: RSS %.0f MB (peak %.0f MB, live heap %.0f MB), ready in %.0f ms", r.Tools, r.RSSMB, r.PeakRSSMB, r.HeapLiveMB, r.ReadyMs)
		out = append(out, r)
	}
	return out, nil
}

// StartupResult is the time from runtime.New to a published catalog with N
// live stdio upstreams.
type StartupResult struct {
	// Upstreams is N, Tools the tools listed, ReadyMs the time to ready.
	Upstreams int     `json:"upstreams"`
	Tools     int     `json:"tools"`
	ReadyMs   float64 `json:"ready_ms"`
}

// RunStartup starts, for each n of ns, a runtime with n stdio upstreams
// (the testdata/upstream binary bin) and times New plus Start, which
// returns once every upstream is connected and listed and the first
// catalog is published.
func RunStartup(ctx context.Context, bin string, ns []int, progress io.Writer) ([]StartupResult, error) {
	say := progressFunc(progress)
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		return nil, fmt.Errorf("card builder: %w", err)
	}
	var out []StartupResult
	for _, n := range ns {
		say("start-up: %d stdio upstreams", n)
		ups := make([]config.Upstream, n)
		for i := range ups {
			name := fmt.Sprintf("up%d", i+1)
			ups[i] = config.NewUpstream(name)
			ups[i].Command, ups[i].ConnectTimeout = []string{bin, "-name", name}, units.Duration(60*time.Second)
			ups[i].Sandbox = &config.Sandbox{Off: "benchmark baseline"}
		}
		cfg := benchConfig(config.ModeGateway, guard.EnvProd, ups...)
		cfg.Timing.ReadyTimeout = 60 * time.Second
		t0 := time.Now()
		rt, err := runtime.New(cfg, runtime.Deps{Cards: cards, Logger: discardLogger()})
		if err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		err = rt.Start(ctx)
		if err == nil {
			err = rt.WaitPublished(ctx)
		}
		if err != nil {
			rt.Close()
			return nil, fmt.Errorf("runtime start: %w", err)
		}
		d := time.Since(t0)
		tools := len(rt.Snapshot().Items(toolid.KindTool))
		if err := rt.Close(); err != nil {
			return nil, fmt.Errorf("runtime close: %w", err)
		}
		r := StartupResult{Upstreams: n, Tools: tools, ReadyMs: round(ms(d), 1)}
		say("  ready in %.0f ms with %d tools", r.ReadyMs, r.Tools)
		out = append(out, r)
	}
	return out, nil
}
