package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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
)

// modulePath is the module whose testdata/upstream the overhead benchmark
// builds.
const modulePath = "github.com/quiver-mcp/quiver"

// FindModuleDir returns the directory of the quiver module that holds dir
// (or one of its parents), or an error when there is none.
func FindModuleDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("module dir: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == modulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s module above the working directory", modulePath)
		}
		dir = parent
	}
}

// BuildUpstream builds testdata/upstream of the module at moduleDir into
// dir with the go command, and returns the binary's path.
func BuildUpstream(ctx context.Context, moduleDir, dir string) (string, error) {
	out := filepath.Join(dir, "upstream")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./testdata/upstream")
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./testdata/upstream: %w: %s", err, bytes.TrimSpace(b))
	}
	return out, nil
}

// httpUpstream is a testdata/upstream process serving streamable HTTP on
// the loopback interface.
type httpUpstream struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startHTTPUpstream starts bin with -transport http on 127.0.0.1 and waits
// for its URL.
func startHTTPUpstream(bin, name string) (*httpUpstream, error) {
	cmd := exec.Command(bin, "-transport", "http", "-addr", "127.0.0.1:0", "-name", name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("upstream stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start upstream: %w", err)
	}
	u := &httpUpstream{cmd: cmd, done: make(chan struct{})}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() { // drain: the server writes nothing else
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(u.done)
	}()
	select {
	case l, ok := <-line:
		if !ok || !strings.HasPrefix(l, "http://127.0.0.1:") {
			u.stop()
			return nil, fmt.Errorf("upstream printed %q, want its URL", l)
		}
		u.url = l
	case <-time.After(20 * time.Second):
		u.stop()
		return nil, errors.New("upstream did not print its URL within 20 s")
	}
	return u, nil
}

// pid returns the process id.
func (u *httpUpstream) pid() int { return u.cmd.Process.Pid }

// stop interrupts the process, kills it after 3 s, and waits for it.
func (u *httpUpstream) stop() {
	_ = u.cmd.Process.Signal(os.Interrupt)
	select {
	case <-u.done:
	case <-time.After(3 * time.Second):
		_ = u.cmd.Process.Kill()
		<-u.done
	}
}

// fastUpstream is a go-sdk server in this process with one echo tool,
// serving streamable HTTP on 127.0.0.1: the fastest upstream there is, so
// that throughput figures measure quiver rather than the upstream.
type fastUpstream struct {
	srv   *http.Server
	url   string
	conns atomic.Int64 // TCP connections accepted
	// revision is the MCP-Protocol-Version of the last request that
	// carried one: the revision quiver (or a direct client) speaks to it.
	revision atomic.Pointer[string]
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

func startFastUpstream() (*fastUpstream, error) { return startFast(false) }

// startFast starts a fast upstream; stateless serves every request without
// a session (the go-sdk's stateless streamable handler), which is what a
// 2026-07-28 server is: quiver then speaks 2026-07-28 to it end to end.
func startFast(stateless bool) (*fastUpstream, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "fast", Version: "1"}, &mcp.ServerOptions{Logger: discardLogger()})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the given text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fast upstream: %w", err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	f := &fastUpstream{url: "http://" + ln.Addr().String() + "/mcp"}
	seen := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
			if p := f.revision.Load(); p == nil || *p != v {
				f.revision.Store(&v)
			}
		}
		h.ServeHTTP(w, r)
	})
	f.srv = &http.Server{Handler: seen, ReadHeaderTimeout: 10 * time.Second, ConnState: countConns(&f.conns)}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *fastUpstream) stop() { _ = f.srv.Close() }

// lastRevision is the revision of the last request that named one, "" if
// none did.
func (f *fastUpstream) lastRevision() string {
	if p := f.revision.Load(); p != nil {
		return *p
	}
	return ""
}

// countConns returns an http.Server.ConnState hook counting new
// connections into n.
func countConns(n *atomic.Int64) func(net.Conn, http.ConnState) {
	return func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
}

// cpuTimes is a reading of /proc/stat's aggregate cpu line.
type cpuTimes struct{ busy, total uint64 }

// readCPU returns the machine's cumulative CPU times, zero where /proc is
// absent.
func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var t cpuTimes
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// busyPct returns the share of CPU time busy between two readings, in %.
func busyPct(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return round(100*float64(b.busy-a.busy)/float64(b.total-a.total), 1)
}

// procCPU returns the CPU time (user + system) of process pid from
// /proc/PID/stat, 0 where it cannot be read. It assumes the usual 100
// clock ticks per second.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procStatus returns a field of /proc/PID/status (or /proc/self/status for
// pid 0) in MiB, 0 when absent.
func procStatusMB(pid int, field string) float64 {
	p := "/proc/self/status"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					return round(kb/1024, 1)
				}
			}
		}
	}
	return 0
}
