package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/units"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/toolid"
)

// OverheadOptions configure RunOverhead. Zero values take the defaults
// given per field.
type OverheadOptions struct {
	// UpstreamBin is a built testdata/upstream binary; empty means build it
	// with the go command from ModuleDir into a temporary directory.
	UpstreamBin string
	// ModuleDir is the quiver module's directory (default: found above the
	// working directory).
	ModuleDir string
	// Catalog, when set, is served by quiver as a static upstream beside
	// the live ones, as a gateway in front of a large fleet would; browse
	// latency is measured over it. Queries are the browse queries (default:
	// self queries of the catalog).
	Catalog string
	Queries string
	// Calls is the number of timed calls per path for small results
	// (default 2000), LargeCalls for large ones (default 300), BrowseCalls
	// for tool_browse (default 1000); Warmup calls per path come first and
	// are not timed (default 50).
	Calls, LargeCalls, BrowseCalls, Warmup int
	// LargeLines is the big_log size of the large result (default 2000
	// lines, about 280 KB).
	LargeLines int
	// Clients are the concurrency levels of the throughput runs (default 1,
	// 8, 64) and Duration the length of each timed run (default 3 s, after
	// a 0.5 s warm-up).
	Clients  []int
	Duration time.Duration
	// Protocols are the MCP revisions the throughput clients speak, each
	// run apart (default 2026-07-28, sessionless, and 2025-11-25).
	Protocols []string
	// NoThroughput skips the throughput runs, NoLatency the latency and
	// browse runs.
	NoThroughput, NoLatency bool
	// ProbeCommand is the argv of a program that runs RunMemoryProbe
	// (`quiver bench memprobe`); empty skips the memory figures, which need
	// a fresh process each. MemoryCatalog is the catalog they load
	// (default Catalog) and MemoryProbes the probes (default: 1,000 tools,
	// the whole catalog, and the x10 synthetic catalog).
	ProbeCommand  []string
	MemoryCatalog string
	MemoryProbes  []MemoryProbeOptions
	// HeapProfile, when set, receives a heap profile of the largest memory
	// probe.
	HeapProfile string
	// StartupUpstreams are the numbers of stdio upstreams of the start-up
	// runs (default 1, 8, 32); a single 0 skips them.
	StartupUpstreams []int
	// SandboxStarts and SandboxCalls are the start-ups and timed echo
	// calls per sandbox mode of the sandbox comparison (default 10 and
	// 500); SandboxStarts < 0 skips it.
	SandboxStarts, SandboxCalls int
	// CPUProfile, when set, receives a CPU profile of this process (client,
	// quiver and the in-process upstream) during the throughput run through
	// quiver at the highest concurrency against the in-process upstream.
	CPUProfile string
	// UpstreamIdleConns, when > 0, is an experiment: quiver's HTTP
	// upstream clients clone http.DefaultTransport, which keeps only 2 idle
	// connections per host, so more concurrent calls than that open a new
	// TCP connection each. The experiment raises the clone's
	// MaxIdleConnsPerHost to this value (by setting it on
	// http.DefaultTransport while the runtime is built, then restoring
	// it), to measure the fix proposed for runtime/upstream. Reports made
	// with it say so in Setup.
	UpstreamIdleConns int
	// Progress, when set, receives one line per step.
	Progress io.Writer
}

// OverheadReport is the outcome of RunOverhead.
type OverheadReport struct {
	// Latency, Browse, Throughput, Memory and Startup hold the sections'
	// figures (empty when skipped).
	Latency    []LatencyResult    `json:"latency"`
	Browse     []BrowseLatency    `json:"browse"`
	Throughput []ThroughputResult `json:"throughput"`
	Memory     []MemoryResult     `json:"memory"`
	Startup    []StartupResult    `json:"startup"`
	// Sandbox compares a stdio upstream without and with the sandbox.
	Sandbox []SandboxResult `json:"sandbox,omitempty"`
	// Goals are the targets and whether this run met them.
	Goals []Goal `json:"goals"`
	// Setup says what was measured against what.
	Setup string `json:"setup"`
	// Machine is where the run happened, Seconds how long it took.
	Machine Machine `json:"machine"`
	Seconds float64 `json:"elapsed_s"`
}

// LatencyResult compares one kind of call made directly to an upstream and
// through quiver, interleaved A/B.
type LatencyResult struct {
	Transport string `json:"transport"` // stdio | http
	Result    string `json:"result"`    // small | large
	Call      string `json:"call"`
	Calls     int    `json:"calls"`
	// Direct* and Quiver* are latency percentiles in ms of the direct and
	// the quiver path.
	DirectP50Ms float64 `json:"direct_p50_ms"`
	DirectP99Ms float64 `json:"direct_p99_ms"`
	QuiverP50Ms float64 `json:"quiver_p50_ms"`
	QuiverP99Ms float64 `json:"quiver_p99_ms"`
	// AddedP50Ms and AddedP99Ms are quiver's minus direct's percentiles;
	// PairedAddedP50Ms is the median of the per-pair differences.
	AddedP50Ms       float64 `json:"added_p50_ms"`
	AddedP99Ms       float64 `json:"added_p99_ms"`
	PairedAddedP50Ms float64 `json:"paired_added_p50_ms"`
	// RatioP50 and RatioP99 are quiver's percentiles over direct's.
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
	// Direct and Quiver are the samples, for plots.
	Direct []time.Duration `json:"-"`
	Quiver []time.Duration `json:"-"`
}

// BrowseLatency is tool_browse latency through quiver.
type BrowseLatency struct {
	// Transport is stdio or http, Tools the catalog size, Calls the timed
	// calls, P50Ms and P99Ms their latency percentiles.
	Transport string  `json:"transport"`
	Tools     int     `json:"tools"`
	Calls     int     `json:"calls"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
}

// ThroughputResult is sustained calls/s with Clients concurrent clients
// (one MCP session each, calling in a loop), direct and through quiver.
type ThroughputResult struct {
	Upstream string `json:"upstream"` // testdata-process | in-process | in-process-stateless
	// Protocol is the revision the clients speak, to quiver and directly.
	Protocol string `json:"protocol,omitempty"`
	Clients  int    `json:"clients"`
	// DirectCallsPerSec and QuiverCallsPerSec are completed calls per
	// second; Ratio is quiver's over direct's.
	DirectCallsPerSec float64 `json:"direct_calls_per_s"`
	QuiverCallsPerSec float64 `json:"quiver_calls_per_s"`
	Ratio             float64 `json:"ratio"`
	// DirectCPUPct and QuiverCPUPct are the machine's busy CPU share during
	// each run (100 = every core busy).
	DirectCPUPct float64 `json:"direct_cpu_busy_pct"`
	QuiverCPUPct float64 `json:"quiver_cpu_busy_pct"`
	// DirectCPUUsPerCall and QuiverCPUUsPerCall are the CPU time spent per
	// completed call by this process (client, quiver, in-process upstream)
	// plus the upstream process, in µs: a figure the other jobs of a
	// shared machine do not move much. DirectCores and QuiverCores are the
	// cores that CPU time amounts to over the run.
	DirectCPUUsPerCall float64 `json:"direct_cpu_us_per_call"`
	QuiverCPUUsPerCall float64 `json:"quiver_cpu_us_per_call"`
	DirectCores        float64 `json:"direct_cores"`
	QuiverCores        float64 `json:"quiver_cores"`
	// QuiverP50Ms and QuiverP99Ms are per-call latencies of the quiver run,
	// DirectP50Ms and DirectP99Ms those of the direct run, AddedP50Ms
	// quiver's p50 minus direct's.
	QuiverP50Ms float64 `json:"quiver_p50_ms"`
	QuiverP99Ms float64 `json:"quiver_p99_ms"`
	DirectP50Ms float64 `json:"direct_p50_ms"`
	DirectP99Ms float64 `json:"direct_p99_ms"`
	AddedP50Ms  float64 `json:"added_p50_ms"`
	// ClientConns is the number of TCP connections the clients opened to
	// quiver during the quiver run, UpstreamConns the number quiver opened
	// to the in-process upstream (0 for the process upstream, not
	// observed): far more connections than clients means connections are
	// not reused.
	ClientConns   int64 `json:"client_conns"`
	UpstreamConns int64 `json:"upstream_conns,omitempty"`
	// UpstreamProtocol is the revision quiver spoke to an in-process
	// upstream during the quiver run (as its requests' MCP-Protocol-Version
	// header said); not observed for the process upstream.
	UpstreamProtocol string `json:"upstream_protocol,omitempty"`
	Errors           int    `json:"errors"`
}

func (o *OverheadOptions) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Calls, 2000)
	def(&o.LargeCalls, 300)
	def(&o.BrowseCalls, 1000)
	def(&o.Warmup, 50)
	def(&o.LargeLines, 2000)
	if len(o.Clients) == 0 {
		o.Clients = []int{1, 8, 64}
	}
	if len(o.Protocols) == 0 {
		o.Protocols = []string{"2026-07-28", "2025-11-25"}
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	if o.MemoryCatalog == "" {
		o.MemoryCatalog = o.Catalog
	}
	if len(o.MemoryProbes) == 0 && o.MemoryCatalog != "" {
		o.MemoryProbes = []MemoryProbeOptions{{Tools: 1000, Seed: 1}, {Seed: 1}, {Scale: 10, Seed: 1}}
	}
	for i := range o.MemoryProbes {
		o.MemoryProbes[i].Catalog = o.MemoryCatalog
	}
	if len(o.MemoryProbes) > 0 && o.HeapProfile != "" {
		o.MemoryProbes[len(o.MemoryProbes)-1].HeapProfile = o.HeapProfile
	}
	if len(o.StartupUpstreams) == 0 {
		o.StartupUpstreams = []int{1, 8, 32}
	}
	if o.SandboxStarts == 0 {
		o.SandboxStarts = 10
	}
	def(&o.SandboxCalls, 500)
}

// bench is the set-up of one overhead run.
type bench struct {
	opts      OverheadOptions
	progress  func(string, ...any)
	bin       string
	httpUp    *httpUpstream
	fast      *fastUpstream
	fastless  *fastUpstream // the same, stateless
	rt        *runtime.Runtime
	quiver    *http.Server
	qconns    atomic.Int64 // TCP connections quiver's listener accepted
	quiverURL string
	hc        *http.Client
	ids       map[string]string // "upstream/tool" -> tool_id
	tools     int
	queries   []Query
}

// RunOverhead measures what quiver adds to a tool call: latency of the
// same calls made directly to an upstream and through an in-process
// quiver runtime (interleaved A/B, over stdio and streamable HTTP), browse
// latency, and sustained throughput with concurrent clients.
func RunOverhead(ctx context.Context, opts OverheadOptions) (rep *OverheadReport, err error) {
	start := time.Now()
	opts.defaults()
	b := &bench{opts: opts, progress: progressFunc(opts.Progress), ids: map[string]string{}}
	defer b.close()
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	rep = &OverheadReport{Machine: ThisMachine(), Setup: fmt.Sprintf(
		"client and quiver runtime in this process (quiver over OS pipes for stdio, over 127.0.0.1 HTTP); "+
			"upstreams: testdata/upstream processes (stdio, HTTP) and an in-process go-sdk server over 127.0.0.1 HTTP; "+
			"quiver serves %d tools", b.tools)}
	if opts.UpstreamIdleConns > 0 {
		rep.Setup += fmt.Sprintf("; EXPERIMENT: quiver's upstream HTTP transport keeps %d idle connections per host (default 2)", opts.UpstreamIdleConns)
	}
	if !opts.NoLatency {
		if rep.Latency, err = b.latency(ctx); err != nil {
			return nil, err
		}
		if rep.Browse, err = b.browse(ctx); err != nil {
			return nil, err
		}
	}
	if !opts.NoThroughput {
		if rep.Throughput, err = b.throughput(ctx); err != nil {
			return nil, err
		}
	}
	if len(opts.ProbeCommand) > 0 && len(opts.MemoryProbes) > 0 {
		if rep.Memory, err = RunMemory(ctx, opts.ProbeCommand, opts.MemoryProbes, opts.Progress); err != nil {
			return nil, err
		}
	}
	if !(len(opts.StartupUpstreams) == 1 && opts.StartupUpstreams[0] == 0) {
		if rep.Startup, err = RunStartup(ctx, b.bin, opts.StartupUpstreams, opts.Progress); err != nil {
			return nil, err
		}
	}
	if opts.SandboxStarts > 0 {
		if rep.Sandbox, err = RunSandbox(ctx, b.bin, opts.SandboxStarts, opts.SandboxCalls, opts.Warmup, opts.Progress); err != nil {
			return nil, err
		}
	}
	rep.Goals = OverheadGoals(rep)
	rep.Seconds = round(time.Since(start).Seconds(), 1)
	return rep, nil
}

func (b *bench) setup(ctx context.Context) error {
	b.bin = b.opts.UpstreamBin
	if b.bin == "" {
		dir := b.opts.ModuleDir
		if dir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("working directory: %w", err)
			}
			if dir, err = FindModuleDir(wd); err != nil {
				return fmt.Errorf("%w (give the upstream binary instead)", err)
			}
		}
		tmp, err := os.MkdirTemp("", "quiver-bench-")
		if err != nil {
			return fmt.Errorf("temp dir: %w", err)
		}
		// The binary stays open by children until close; the directory
		// goes with the process's temp files.
		b.progress("building testdata/upstream")
		if b.bin, err = BuildUpstream(ctx, dir, tmp); err != nil {
			return err
		}
	}
	var err error
	if b.httpUp, err = startHTTPUpstream(b.bin, "http"); err != nil {
		return err
	}
	if b.fast, err = startFastUpstream(); err != nil {
		return err
	}
	if b.fastless, err = startFast(true); err != nil {
		return err
	}
	// Clients share one HTTP transport that keeps enough idle connections
	// for every concurrent client: the default of 2 per host would open a
	// new TCP connection for most calls.
	b.hc = &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}}

	live := func(name string, command []string, url string) config.Upstream {
		u := config.NewUpstream(name)
		u.Command, u.URL, u.ConnectTimeout = command, url, units.Duration(20*time.Second)
		return u
	}
	ups := []config.Upstream{
		live("stdio", []string{b.bin, "-name", "stdio"}, ""),
		live("http", nil, b.httpUp.url),
		live("fast", nil, b.fast.url),
		live("fastless", nil, b.fastless.url),
	}
	catalogs := map[string]catalog.Source{}
	if b.opts.Catalog != "" {
		src, err := loadSource(b.opts.Catalog)
		if err != nil {
			return err
		}
		ups = append(ups, config.NewUpstream("catalog"))
		catalogs["catalog"] = src
		if b.opts.Queries != "" {
			if b.queries, err = LoadQueries(b.opts.Queries); err != nil {
				return err
			}
		} else {
			b.queries = SelfQueries(src, 500, 1)
		}
	}
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		return fmt.Errorf("card builder: %w", err)
	}
	b.progress("starting the quiver runtime (%d upstreams)", len(ups))
	restore := func() {}
	if n := b.opts.UpstreamIdleConns; n > 0 {
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			prev := t.MaxIdleConnsPerHost
			t.MaxIdleConnsPerHost = n
			restore = func() { t.MaxIdleConnsPerHost = prev }
		}
	}
	cfg := benchConfig(config.ModeGateway, benchEnvironment, ups...)
	cfg.Timing.ReadyTimeout = 30 * time.Second
	b.rt, err = runtime.New(cfg, runtime.Deps{Cards: cards, Logger: discardLogger(), Catalogs: catalogs})
	restore()
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	err = b.rt.Start(ctx)
	if err == nil {
		err = b.rt.WaitPublished(ctx)
	}
	if err != nil {
		return fmt.Errorf("runtime start: %w", err)
	}
	items := b.rt.Snapshot().Items(toolid.KindTool)
	b.tools = len(items)
	for _, it := range items {
		b.ids[it.Server+"/"+it.UpstreamName] = it.ID
	}
	for _, k := range []string{"stdio/echo", "stdio/big_log", "http/echo", "http/big_log", "fast/echo", "fastless/echo"} {
		if b.ids[k] == "" {
			return fmt.Errorf("quiver does not serve %s: an upstream did not come up", k)
		}
	}
	if len(b.queries) == 0 {
		for _, q := range []string{"echo text back", "add two numbers", "large application log", "CSV rows with a header", "greet someone"} {
			b.queries = append(b.queries, Query{Text: q})
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("quiver listener: %w", err)
	}
	b.quiver = &http.Server{Handler: b.rt.Handler("/mcp"), ReadHeaderTimeout: 10 * time.Second, ConnState: countConns(&b.qconns)}
	b.quiverURL = "http://" + ln.Addr().String() + "/mcp"
	go func() { _ = b.quiver.Serve(ln) }()
	return nil
}

func (b *bench) close() {
	if b.quiver != nil {
		_ = b.quiver.Close()
	}
	if b.rt != nil {
		_ = b.rt.Close()
	}
	if b.fast != nil {
		b.fast.stop()
	}
	if b.fastless != nil {
		b.fastless.stop()
	}
	if b.httpUp != nil {
		b.httpUp.stop()
	}
	if b.opts.UpstreamBin == "" && b.bin != "" {
		_ = os.RemoveAll(filepath.Dir(b.bin))
	}
}

// httpSession connects a client to url over streamable HTTP, at protocol
// revision proto ("" for the go-sdk's default).
func (b *bench) httpSession(ctx context.Context, url, proto string) (*mcp.ClientSession, error) {
	var so *mcp.ClientSessionOptions
	if proto != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: proto}
	}
	cs, err := newClient("quiver-bench").Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: b.hc, MaxRetries: -1}, so)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return cs, nil
}

// stdioDirect starts an upstream process and connects to it over stdio.
func (b *bench) stdioDirect(ctx context.Context) (*mcp.ClientSession, error) {
	cmd := exec.Command(b.bin, "-name", "direct")
	cs, err := newClient("quiver-bench").Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 500 * time.Millisecond}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect upstream over stdio: %w", err)
	}
	return cs, nil
}

// stdioQuiver connects a client to the runtime over a pair of OS pipes,
// with stdio's newline-delimited framing.
func (b *bench) stdioQuiver(ctx context.Context) (*mcp.ClientSession, func(), error) {
	c2sR, c2sW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	s2cR, s2cW, err := os.Pipe()
	if err != nil {
		c2sR.Close()
		c2sW.Close()
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	ss, err := b.rt.Server().Connect(ctx, &mcp.IOTransport{Reader: c2sR, Writer: s2cW}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("quiver stdio session: %w", err)
	}
	cs, err := newClient("quiver-bench").Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		ss.Close()
		return nil, nil, fmt.Errorf("connect quiver over stdio: %w", err)
	}
	return cs, func() { cs.Close(); ss.Close() }, nil
}

// call is one timed tool call.
type call func(ctx context.Context) error

func toolCall(cs *mcp.ClientSession, name string, args map[string]any) call {
	return func(ctx context.Context) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s: %s", name, cut(ResultText(res), 200))
		}
		return nil
	}
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// executeCall is tool_execute of tool_id with args.
func executeCall(cs *mcp.ClientSession, id string, args map[string]any) call {
	return toolCall(cs, runtime.ToolExecute, map[string]any{"tool_id": id, "args": args})
}

// pair times n interleaved calls of a and b (a first on even rounds, b
// first on odd ones) after warm untimed calls of each.
func pair(ctx context.Context, n, warm int, a, b call) (da, db []time.Duration, err error) {
	for range warm {
		if err := a(ctx); err != nil {
			return nil, nil, err
		}
		if err := b(ctx); err != nil {
			return nil, nil, err
		}
	}
	da = make([]time.Duration, 0, n)
	db = make([]time.Duration, 0, n)
	timed := func(c call, into *[]time.Duration) error {
		t := time.Now()
		if err := c(ctx); err != nil {
			return err
		}
		*into = append(*into, time.Since(t))
		return nil
	}
	for i := range n {
		first, second := a, b
		fi, si := &da, &db
		if i%2 == 1 {
			first, second, fi, si = b, a, &db, &da
		}
		if err := timed(first, fi); err != nil {
			return nil, nil, err
		}
		if err := timed(second, si); err != nil {
			return nil, nil, err
		}
	}
	return da, db, nil
}

func (b *bench) latency(ctx context.Context) ([]LatencyResult, error) {
	small := map[string]any{"text": "hello"}
	large := map[string]any{"lines": b.opts.LargeLines}
	var out []LatencyResult
	for _, transport := range []string{"stdio", "http"} {
		var direct, quiver *mcp.ClientSession
		var closeQuiver func()
		var err error
		if transport == "stdio" {
			if direct, err = b.stdioDirect(ctx); err != nil {
				return nil, err
			}
			if quiver, closeQuiver, err = b.stdioQuiver(ctx); err != nil {
				direct.Close()
				return nil, err
			}
		} else {
			if direct, err = b.httpSession(ctx, b.httpUp.url, ""); err != nil {
				return nil, err
			}
			if quiver, err = b.httpSession(ctx, b.quiverURL, ""); err != nil {
				direct.Close()
				return nil, err
			}
			closeQuiver = func() { quiver.Close() }
		}
		for _, c := range []struct {
			size, tool string
			args       map[string]any
			n          int
		}{
			{"small", "echo", small, b.opts.Calls},
			{"large", "big_log", large, b.opts.LargeCalls},
		} {
			b.progress("latency %s %s: %d interleaved calls per path", transport, c.size, c.n)
			d, q, err := pair(ctx, c.n, b.opts.Warmup, toolCall(direct, c.tool, c.args), executeCall(quiver, b.ids[transport+"/"+c.tool], c.args))
			if err != nil {
				direct.Close()
				closeQuiver()
				return nil, fmt.Errorf("latency %s %s: %w", transport, c.size, err)
			}
			r := latencyResult(transport, c.size, fmt.Sprintf("%s %v", c.tool, c.args), d, q)
			b.progress("  direct p50 %.3f ms p99 %.3f ms; quiver p50 %.3f ms p99 %.3f ms; added p50 %.3f ms",
				r.DirectP50Ms, r.DirectP99Ms, r.QuiverP50Ms, r.QuiverP99Ms, r.AddedP50Ms)
			out = append(out, r)
		}
		direct.Close()
		closeQuiver()
	}
	return out, nil
}

func latencyResult(transport, size, what string, d, q []time.Duration) LatencyResult {
	r := LatencyResult{Transport: transport, Result: size, Call: what, Calls: len(d), Direct: d, Quiver: q,
		DirectP50Ms: msRound(percentile(d, 0.50)), DirectP99Ms: msRound(percentile(d, 0.99)),
		QuiverP50Ms: msRound(percentile(q, 0.50)), QuiverP99Ms: msRound(percentile(q, 0.99))}
	r.AddedP50Ms = round(r.QuiverP50Ms-r.DirectP50Ms, 3)
	r.AddedP99Ms = round(r.QuiverP99Ms-r.DirectP99Ms, 3)
	diff := make([]time.Duration, len(d))
	for i := range d {
		diff[i] = q[i] - d[i]
	}
	r.PairedAddedP50Ms = msRound(percentile(diff, 0.50))
	if r.DirectP50Ms > 0 {
		r.RatioP50 = round(r.QuiverP50Ms/r.DirectP50Ms, 2)
	}
	if r.DirectP99Ms > 0 {
		r.RatioP99 = round(r.QuiverP99Ms/r.DirectP99Ms, 2)
	}
	return r
}

func msRound(d time.Duration) float64 { return round(ms(d), 3) }

func (b *bench) browse(ctx context.Context) ([]BrowseLatency, error) {
	var out []BrowseLatency
	for _, transport := range []string{"stdio", "http"} {
		var cs *mcp.ClientSession
		closeFn := func() {}
		var err error
		if transport == "stdio" {
			cs, closeFn, err = b.stdioQuiver(ctx)
		} else {
			cs, err = b.httpSession(ctx, b.quiverURL, "")
			if err == nil {
				closeFn = func() { cs.Close() }
			}
		}
		if err != nil {
			return nil, err
		}
		b.progress("browse latency %s: %d tool_browse calls over %d tools", transport, b.opts.BrowseCalls, b.tools)
		lat := make([]time.Duration, 0, b.opts.BrowseCalls)
		for i := range b.opts.Warmup + b.opts.BrowseCalls {
			q := b.queries[i%len(b.queries)]
			t := time.Now()
			if err := toolCall(cs, runtime.ToolBrowse, map[string]any{"query": q.Text, "top_k": 10})(ctx); err != nil {
				closeFn()
				return nil, fmt.Errorf("browse %q: %w", q.Text, err)
			}
			if i >= b.opts.Warmup {
				lat = append(lat, time.Since(t))
			}
		}
		closeFn()
		r := BrowseLatency{Transport: transport, Tools: b.tools, Calls: len(lat), P50Ms: msRound(percentile(lat, 0.5)), P99Ms: msRound(percentile(lat, 0.99))}
		b.progress("  p50 %.3f ms p99 %.3f ms", r.P50Ms, r.P99Ms)
		out = append(out, r)
	}
	return out, nil
}

func (b *bench) throughput(ctx context.Context) ([]ThroughputResult, error) {
	var out []ThroughputResult
	maxC := slices.Max(b.opts.Clients)
	for _, up := range []struct {
		name, url, key string
		fast           *fastUpstream
	}{
		{"in-process", b.fast.url, "fast/echo", b.fast},
		{"in-process-stateless", b.fastless.url, "fastless/echo", b.fastless},
		{"testdata-process", b.httpUp.url, "http/echo", nil},
	} {
		for pi, proto := range b.opts.Protocols {
			for i, c := range b.opts.Clients {
				r := ThroughputResult{Upstream: up.name, Protocol: proto, Clients: c}
				args := map[string]any{"text": "hello"}
				run := func(quiver bool) error {
					url := up.url
					if quiver {
						url = b.quiverURL
					}
					profile := ""
					if quiver && up.name == "in-process" && c == maxC && pi == 0 {
						profile = b.opts.CPUProfile
					}
					b.progress("throughput %s, %s, %d clients, %s: %s", up.name, proto, c, map[bool]string{true: "quiver", false: "direct"}[quiver], b.opts.Duration)
					q0, f0 := b.qconns.Load(), int64(0)
					if up.fast != nil {
						f0 = up.fast.conns.Load()
						up.fast.revision.Store(nil)
					}
					upPid := 0
					if up.name == "testdata-process" {
						upPid = b.httpUp.pid()
					}
					st, err := b.sustain(ctx, url, proto, c, upPid, func(cs *mcp.ClientSession) call {
						if quiver {
							return executeCall(cs, b.ids[up.key], args)
						}
						return toolCall(cs, "echo", args)
					}, profile)
					if err != nil {
						return err
					}
					if quiver {
						r.QuiverCallsPerSec, r.QuiverCPUPct = st.perSec, st.cpu
						r.QuiverCPUUsPerCall, r.QuiverCores = st.usPerCall, st.cores
						r.QuiverP50Ms, r.QuiverP99Ms = msRound(percentile(st.lat, 0.5)), msRound(percentile(st.lat, 0.99))
						r.ClientConns = b.qconns.Load() - q0
						if up.fast != nil {
							r.UpstreamConns = up.fast.conns.Load() - f0
							r.UpstreamProtocol = up.fast.lastRevision()
						}
					} else {
						r.DirectCallsPerSec, r.DirectCPUPct = st.perSec, st.cpu
						r.DirectCPUUsPerCall, r.DirectCores = st.usPerCall, st.cores
						r.DirectP50Ms, r.DirectP99Ms = msRound(percentile(st.lat, 0.5)), msRound(percentile(st.lat, 0.99))
					}
					r.Errors += st.errors
					b.progress("  %.0f calls/s, machine CPU %.0f%% busy, %.2f cores used by the benchmark (%.0f µs CPU per call), %d errors",
						st.perSec, st.cpu, st.cores, st.usPerCall, st.errors)
					return nil
				}
				order := []bool{false, true}
				if i%2 == 1 {
					order = []bool{true, false}
				}
				for _, q := range order {
					if err := run(q); err != nil {
						return nil, fmt.Errorf("throughput %s %s %d clients: %w", up.name, proto, c, err)
					}
				}
				if r.DirectCallsPerSec > 0 {
					r.Ratio = round(r.QuiverCallsPerSec/r.DirectCallsPerSec, 3)
				}
				r.AddedP50Ms = round(r.QuiverP50Ms-r.DirectP50Ms, 3)
				out = append(out, r)
			}
		}
	}
	return out, nil
}

type sustained struct {
	perSec    float64
	cpu       float64
	cores     float64
	usPerCall float64
	errors    int
	lat       []time.Duration
}

// maxSamples bounds the latencies kept per throughput run.
const maxSamples = 200_000

// sustain runs c sessions to url, each calling in a loop, for a warm-up of
// 0.5 s and then for the configured duration, and counts completed calls.
// upPid, when not 0, is an upstream process whose CPU time counts too.
func (b *bench) sustain(ctx context.Context, url, proto string, c int, upPid int, mk func(*mcp.ClientSession) call, profile string) (sustained, error) {
	var st sustained
	sessions := make([]*mcp.ClientSession, 0, c)
	defer func() {
		for _, cs := range sessions {
			cs.Close()
		}
	}()
	for range c {
		cs, err := b.httpSession(ctx, url, proto)
		if err != nil {
			return st, err
		}
		sessions = append(sessions, cs)
	}
	const warm = 500 * time.Millisecond
	runCtx, cancel := context.WithTimeout(ctx, warm+b.opts.Duration+30*time.Second)
	defer cancel()
	var (
		timing   atomic.Bool
		stop     atomic.Bool
		count    atomic.Int64
		errCount atomic.Int64
		firstErr error
		mu       sync.Mutex
		lat      []time.Duration
		wg       sync.WaitGroup
	)
	for _, cs := range sessions {
		fn := mk(cs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			for !stop.Load() && runCtx.Err() == nil {
				t := time.Now()
				err := fn(runCtx)
				d := time.Since(t)
				if stop.Load() {
					break
				}
				if err != nil {
					errCount.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					if errCount.Load() > 100 {
						return
					}
					continue
				}
				if timing.Load() {
					count.Add(1)
					if len(local) < maxSamples/max(c, 1) {
						local = append(local, d)
					}
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	time.Sleep(warm)
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			stop.Store(true)
			wg.Wait()
			return st, fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			stop.Store(true)
			wg.Wait()
			return st, fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := readCPU()
	own0 := selfCPU()
	if upPid > 0 {
		own0 += procCPU(upPid)
	}
	t0 := time.Now()
	timing.Store(true)
	select {
	case <-time.After(b.opts.Duration):
	case <-ctx.Done():
	}
	timing.Store(false)
	elapsed := time.Since(t0)
	cpu1 := readCPU()
	own1 := selfCPU()
	if upPid > 0 {
		own1 += procCPU(upPid)
	}
	n := count.Load()
	stop.Store(true)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return st, err
	}
	st.perSec = round(float64(n)/elapsed.Seconds(), 1)
	st.cpu = busyPct(cpu0, cpu1)
	st.cores = round((own1-own0).Seconds()/elapsed.Seconds(), 2)
	if n > 0 {
		st.usPerCall = round(float64((own1-own0).Microseconds())/float64(n), 1)
	}
	st.errors = int(errCount.Load())
	st.lat = lat
	if st.errors > 100 {
		return st, fmt.Errorf("%d failed calls, the first: %w", st.errors, firstErr)
	}
	if n == 0 {
		return st, errors.New("no call completed")
	}
	return st, nil
}
