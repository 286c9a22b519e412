package benchmarks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/redisstate"
	"github.com/quiver-mcp/quiver/runtime/units"
)

// StateBackends are the backends RunStateOverhead knows: embedded as the
// owner of the store (the first quiver process of a machine), embedded as
// a client of another process's store (every other one, over the Unix
// socket), redis, and memory (one process, nothing shared, for tests).
var StateBackends = []string{"embedded", "embedded-client", "redis", "memory"}

// StateOverheadOptions configure RunStateOverhead.
type StateOverheadOptions struct {
	// Backends to compare (default: all of StateBackends); the first is
	// the reference of the "added" columns.
	Backends []string
	// RedisURL is the Redis of the redis backend; empty starts a
	// redis-server from PATH on a free loopback port for the run.
	RedisURL string
	// Calls is the number of timed calls of each kind per backend
	// (default 2000), interleaved across backends.
	Calls int
	// Clients and Duration shape the throughput run (default 8 clients,
	// 3 s per backend).
	Clients  int
	Duration time.Duration
	// Progress, when set, receives one line per step.
	Progress io.Writer
}

// StateOverheadReport is the outcome of RunStateOverhead.
type StateOverheadReport struct {
	Rows    []StateRow `json:"rows"`
	Setup   string     `json:"setup"`
	Machine Machine    `json:"machine"`
	Seconds float64    `json:"elapsed_s"`
}

// StateRow is one backend's figures: a read call (tool_execute of a read
// tool: the incident state is read, the rate limit window admitted), a
// write call (the same with a fresh idempotency key: reserved, then
// completed), and sustained read calls.
type StateRow struct {
	Backend     string  `json:"backend"`
	ReadP50Ms   float64 `json:"read_p50_ms"`
	ReadP99Ms   float64 `json:"read_p99_ms"`
	WriteP50Ms  float64 `json:"write_p50_ms"`
	WriteP99Ms  float64 `json:"write_p99_ms"`
	AddedRead   float64 `json:"added_read_p50_ms"`
	AddedWrite  float64 `json:"added_write_p50_ms"`
	CallsPerSec float64 `json:"calls_per_s"`
	OpsPerRead  float64 `json:"state_ops_per_read"`
	OpsPerWrite float64 `json:"state_ops_per_write"`
	Errors      int     `json:"errors"`
}

// stateRig is one runtime on one backend, served over loopback HTTP.
type stateRig struct {
	name    string
	backend *countedBackend
	closers []func()
	rt      *runtime.Runtime
	srv     *http.Server
	url     string
	cs      *mcp.ClientSession
	// echo is the read tool, echoW the write tool.
	echo, echoW string
}

func (s *stateRig) close() {
	if s.cs != nil {
		s.cs.Close()
	}
	if s.srv != nil {
		_ = s.srv.Close()
	}
	if s.rt != nil {
		_ = s.rt.Close()
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// RunStateOverhead measures what the state backend adds to a call: the same
// runtime, upstream and calls on each backend, interleaved call by call,
// with the state operations each call makes counted.
func RunStateOverhead(ctx context.Context, o StateOverheadOptions) (*StateOverheadReport, error) {
	start := time.Now()
	if len(o.Backends) == 0 {
		o.Backends = StateBackends
	}
	if o.Calls <= 0 {
		o.Calls = 2000
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	progress := progressFunc(o.Progress)
	tmp, err := os.MkdirTemp("", "quiver-bench-state-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	fast, err := startFastUpstream()
	if err != nil {
		return nil, err
	}
	defer fast.stop()
	// The upstream is served twice: as "fast", whose echo the registry
	// classifies read, and as "fastw", whose echo is a write, so that a
	// call with an idempotency key keeps a record.
	reg := filepath.Join(tmp, "registry-*.json")
	for _, m := range []string{
		`{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"fast","server_version":"1","tools":[{"tool_name":"echo","tool_class":"read","is_document_op":false}]}`,
		`{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"fastw","server_version":"1","tools":[{"tool_name":"echo","tool_class":"write","is_document_op":false}]}`,
	} {
		f, err := os.CreateTemp(tmp, "registry-*.json")
		if err != nil {
			return nil, err
		}
		_, werr := f.WriteString(m)
		if err := errors.Join(werr, f.Close()); err != nil {
			return nil, err
		}
	}
	redisURL := o.RedisURL
	cards, err := choicecard.NewDefaultBuilder()
	if err != nil {
		return nil, err
	}
	var rigs []*stateRig
	defer func() {
		for _, r := range rigs {
			r.close()
		}
	}()
	for _, name := range o.Backends {
		if name == "redis" && redisURL == "" {
			url, stop, err := startRedis(ctx, tmp)
			if err != nil {
				return nil, err
			}
			defer stop()
			redisURL = url
		}
		progress("starting a runtime on the %s backend", name)
		r, err := newStateRig(ctx, name, filepath.Join(tmp, name), redisURL, reg, fast.url, cards)
		if r != nil {
			rigs = append(rigs, r)
		}
		if err != nil {
			return nil, fmt.Errorf("%s backend: %w", name, err)
		}
	}
	rep := &StateOverheadReport{Machine: ThisMachine(), Setup: fmt.Sprintf(
		"one quiver runtime per backend in this process, each over 127.0.0.1 HTTP in front of the same in-process go-sdk upstream; "+
			"read: tool_execute of echo classified read; write: of echo classified write, with a fresh idempotency key per call; %d calls of each per backend, interleaved; "+
			"throughput: %d clients for %s per backend", o.Calls, o.Clients, o.Duration)}
	reads := make([][]time.Duration, len(rigs))
	writes := make([][]time.Duration, len(rigs))
	readOps := make([]uint64, len(rigs))
	writeOps := make([]uint64, len(rigs))
	errs := make([]int, len(rigs))
	var seq atomic.Int64
	timed := func(r *stateRig, key bool) (time.Duration, uint64, error) {
		args := map[string]any{"tool_id": r.echo, "args": map[string]any{"text": "hello"}}
		if key {
			args["tool_id"] = r.echoW
			args["idempotency_key"] = "bench-" + strconv.FormatInt(seq.Add(1), 10)
		}
		ops := r.backend.Ops()
		t := time.Now()
		err := toolCall(r.cs, runtime.ToolExecute, args)(ctx)
		return time.Since(t), r.backend.Ops() - ops, err
	}
	progress("latency: %d read and %d write calls per backend, interleaved", o.Calls, o.Calls)
	for i := range o.Calls + 50 {
		for j := range rigs {
			k := (i + j) % len(rigs) // rotate who goes first
			r := rigs[k]
			for _, write := range []bool{i%2 == 0, i%2 == 1} {
				d, ops, err := timed(r, write)
				if err != nil {
					errs[k]++
					if errs[k] == 1 {
						progress("  %s: %v", r.name, err)
					}
					continue
				}
				if i < 50 {
					continue // warm-up
				}
				if write {
					writes[k], writeOps[k] = append(writes[k], d), writeOps[k]+ops
				} else {
					reads[k], readOps[k] = append(reads[k], d), readOps[k]+ops
				}
			}
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}}
	for k, r := range rigs {
		row := StateRow{Backend: r.name, Errors: errs[k]}
		row.ReadP50Ms, row.ReadP99Ms = msRound(percentile(reads[k], 0.5)), msRound(percentile(reads[k], 0.99))
		row.WriteP50Ms, row.WriteP99Ms = msRound(percentile(writes[k], 0.5)), msRound(percentile(writes[k], 0.99))
		if n := len(reads[k]); n > 0 {
			row.OpsPerRead = round(float64(readOps[k])/float64(n), 2)
		}
		if n := len(writes[k]); n > 0 {
			row.OpsPerWrite = round(float64(writeOps[k])/float64(n), 2)
		}
		progress("throughput on %s: %d clients, %s", r.name, o.Clients, o.Duration)
		b := &bench{opts: OverheadOptions{Duration: o.Duration}, hc: hc, progress: progress}
		st, err := b.sustain(ctx, r.url, "", o.Clients, 0, func(cs *mcp.ClientSession) call {
			return executeCall(cs, r.echo, map[string]any{"text": "hello"})
		}, "")
		if err != nil {
			return nil, fmt.Errorf("throughput on %s: %w", r.name, err)
		}
		row.CallsPerSec, row.Errors = round(st.perSec, 0), row.Errors+st.errors
		rep.Rows = append(rep.Rows, row)
	}
	if len(rep.Rows) > 0 {
		ref := rep.Rows[0]
		for i := range rep.Rows {
			rep.Rows[i].AddedRead = round(rep.Rows[i].ReadP50Ms-ref.ReadP50Ms, 3)
			rep.Rows[i].AddedWrite = round(rep.Rows[i].WriteP50Ms-ref.WriteP50Ms, 3)
		}
	}
	rep.Seconds = round(time.Since(start).Seconds(), 1)
	return rep, nil
}

// newStateRig starts a runtime on the named backend.
func newStateRig(ctx context.Context, name, dir, redisURL, registry, upstreamURL string, cards *choicecard.Builder) (*stateRig, error) {
	r := &stateRig{name: name}
	ao := artifacts.Options{Logger: discardLogger()}
	var b state.Backend
	var err error
	switch name {
	case "memory":
		b, err = state.OpenMemory(ao)
	case "embedded":
		b, err = state.OpenEmbedded(ctx, state.EmbeddedOptions{Dir: dir, Artifacts: ao, Logger: discardLogger()})
	case "embedded-client":
		// Another process would own the store; a second backend on the same
		// directory in this process is a client of the first just the same.
		var owner state.Backend
		if owner, err = state.OpenEmbedded(ctx, state.EmbeddedOptions{Dir: dir, Artifacts: ao, Logger: discardLogger()}); err != nil {
			return nil, err
		}
		r.closers = append(r.closers, func() { _ = owner.Close() })
		b, err = state.OpenEmbedded(ctx, state.EmbeddedOptions{Dir: dir, Artifacts: ao, Logger: discardLogger()})
	case "redis":
		b, err = redisstate.Open(ctx, redisstate.Options{URL: redisURL, KeyPrefix: "quiver-bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":", Artifacts: ao, Logger: discardLogger()})
	default:
		return nil, fmt.Errorf("unknown backend %q (one of %s)", name, strings.Join(StateBackends, ", "))
	}
	if err != nil {
		return r, err
	}
	r.closers = append(r.closers, func() { _ = b.Close() })
	r.backend = countBackend(b)
	var ups []config.Upstream
	for _, n := range []string{"fast", "fastw"} {
		up := config.NewUpstream(n)
		up.URL, up.ConnectTimeout = upstreamURL, units.Duration(20*time.Second)
		ups = append(ups, up)
	}
	cfg := benchConfig(config.ModeGateway, guard.EnvDev, ups...)
	cfg.Registry = []string{registry}
	cfg.Timing.ReadyTimeout = 30 * time.Second
	if r.rt, err = runtime.New(cfg, runtime.Deps{Cards: cards, Logger: discardLogger(), State: r.backend}); err != nil {
		return r, err
	}
	err = r.rt.Start(ctx)
	if err == nil {
		err = r.rt.WaitPublished(ctx)
	}
	if err != nil {
		return r, err
	}
	for _, it := range r.rt.Snapshot().Items("tool") {
		if it.UpstreamName == "echo" {
			switch it.Server {
			case "fast":
				r.echo = it.ID
			case "fastw":
				r.echoW = it.ID
			}
		}
	}
	if r.echo == "" || r.echoW == "" {
		return r, errors.New("the upstream's echo is not served")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	r.srv = &http.Server{Handler: r.rt.Handler("/mcp"), ReadHeaderTimeout: 10 * time.Second}
	r.url = "http://" + ln.Addr().String() + "/mcp"
	go func() { _ = r.srv.Serve(ln) }()
	r.cs, err = newClient("quiver-bench").Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url, MaxRetries: -1}, nil)
	return r, err
}

// startRedis starts a throwaway redis-server from PATH on a free loopback
// port, without persistence, and returns its URL and how to stop it.
func startRedis(ctx context.Context, dir string) (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New("redis-server is not on PATH: install it, or give --redis-url")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("redis-server: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		_, _ = c.Write([]byte("PING\r\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.HasPrefix(line, "+PONG") {
			return "redis://" + addr + "/0", stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("redis-server on port %d did not answer", port)
}

// WriteStateTable prints a StateOverheadReport.
func WriteStateTable(w io.Writer, rep *StateOverheadReport) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, rep.Setup)
	fmt.Fprintf(bw, "\n%-16s %8s %8s %8s %8s %9s %9s %9s %9s %9s %6s\n", "backend", "read p50", "read p99", "write p50", "write p99",
		"+read", "+write", "calls/s", "ops/read", "ops/write", "errors")
	for _, r := range rep.Rows {
		fmt.Fprintf(bw, "%-16s %8.3f %8.3f %8.3f %8.3f %9.3f %9.3f %9.0f %9.2f %9.2f %6d\n", r.Backend, r.ReadP50Ms, r.ReadP99Ms, r.WriteP50Ms, r.WriteP99Ms,
			r.AddedRead, r.AddedWrite, r.CallsPerSec, r.OpsPerRead, r.OpsPerWrite, r.Errors)
	}
	fmt.Fprintf(bw, "\n(ms; +read and +write: p50 added against %s; %.0f s on %s)\n", firstBackend(rep), rep.Seconds, fmt.Sprintf("%d CPUs %s", rep.Machine.CPUs, rep.Machine.CPUModel))
	return bw.Flush()
}

func firstBackend(rep *StateOverheadReport) string {
	if len(rep.Rows) == 0 {
		return "-"
	}
	return rep.Rows[0].Backend
}
