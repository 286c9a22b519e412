package benchmarks

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/sandbox"
)

// TestMain lets the test binary act as a memory probe child, as `quiver
// bench memprobe` does for the real command.
//
// It also serves as the sandbox helper of the sandboxed runs.
func TestMain(m *testing.M) {
	sandbox.RunHelper(os.Args)
	if os.Getenv("QUIVER_BENCH_MEMPROBE_CHILD") == "1" {
		if err := RunMemoryProbe(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOverheadSmoke runs every section of the overhead benchmark with tiny
// counts, so that CI exercises the code paths (not the figures).
func TestOverheadSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts upstream processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mod, err := FindModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := BuildUpstream(ctx, mod, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("QUIVER_BENCH_MEMPROBE_CHILD", "1")
	var progress strings.Builder
	rep, err := RunOverhead(ctx, OverheadOptions{
		UpstreamBin: bin, Catalog: "testdata/route-tools.jsonl", Queries: "testdata/route-queries.jsonl",
		Calls: 5, LargeCalls: 2, BrowseCalls: 5, Warmup: 1, LargeLines: 300,
		Clients: []int{1, 3}, Duration: 150 * time.Millisecond, StartupUpstreams: []int{2},
		SandboxStarts: 1, SandboxCalls: 3,
		ProbeCommand: []string{os.Args[0], "-test.run=^$"},
		MemoryProbes: []MemoryProbeOptions{{Tools: 3, Seed: 1}, {Scale: 2, Seed: 1}},
		CPUProfile:   t.TempDir() + "/cpu.pprof", HeapProfile: t.TempDir() + "/heap.pprof",
		Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rep.Latency) != 4 {
		t.Fatalf("latency rows %+v", rep.Latency)
	}
	for _, l := range rep.Latency {
		if l.Calls != 5 && l.Calls != 2 || l.DirectP50Ms <= 0 || l.QuiverP50Ms <= 0 || len(l.Direct) != l.Calls {
			t.Errorf("latency %+v", l)
		}
	}
	if len(rep.Browse) != 2 || rep.Browse[0].Calls != 5 || rep.Browse[0].Tools < 6 {
		t.Errorf("browse %+v", rep.Browse)
	}
	// Three upstreams (in-process with sessions, in-process stateless, a
	// process), two revisions, two client counts.
	if len(rep.Throughput) != 12 {
		t.Fatalf("throughput %+v", rep.Throughput)
	}
	protos := map[string]int{}
	for _, r := range rep.Throughput {
		protos[r.Protocol]++
	}
	if protos["2026-07-28"] != 6 || protos["2025-11-25"] != 6 {
		t.Errorf("throughput by protocol %v", protos)
	}
	for _, r := range rep.Throughput {
		if r.DirectCallsPerSec <= 0 || r.QuiverCallsPerSec <= 0 || r.Errors != 0 {
			t.Errorf("throughput %+v", r)
		}
		// quiver speaks 2026-07-28 to the stateless upstream and what a
		// sessionful go-sdk server negotiates (2025-11-25) to the other.
		want := map[string]string{"in-process-stateless": "2026-07-28", "in-process": "2025-11-25"}[r.Upstream]
		if r.UpstreamProtocol != want {
			t.Errorf("%s: quiver spoke %q to the upstream, want %q", r.Upstream, r.UpstreamProtocol, want)
		}
	}
	if len(rep.Memory) != 2 || rep.Memory[0].Tools != 3 || rep.Memory[1].Scale != 2 || rep.Memory[1].Tools < 10 || rep.Memory[0].RSSMB <= 0 {
		t.Errorf("memory %+v", rep.Memory)
	}
	if len(rep.Startup) != 1 || rep.Startup[0].Upstreams != 2 || rep.Startup[0].Tools == 0 {
		t.Errorf("startup %+v", rep.Startup)
	}
	if len(rep.Sandbox) == 0 || rep.Sandbox[0].Mode != "off" || rep.Sandbox[0].P50Ms <= 0 || rep.Sandbox[0].StartP50Ms <= 0 {
		t.Errorf("sandbox %+v", rep.Sandbox)
	}
	if len(rep.Goals) != 3 {
		t.Errorf("goals %+v", rep.Goals)
	}
	var b strings.Builder
	if err := WriteOverheadTable(&b, rep); err != nil || !strings.Contains(b.String(), "Throughput") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := WriteLatencySVG(&b, rep); err != nil || strings.Count(b.String(), "<polyline") != 8 {
		t.Fatalf("latency svg: %v", err)
	}
}

func TestPair(t *testing.T) {
	var order []string
	a := func(context.Context) error { order = append(order, "a"); return nil }
	b := func(context.Context) error { order = append(order, "b"); return nil }
	da, db, err := pair(context.Background(), 3, 1, a, b)
	if err != nil || len(da) != 3 || len(db) != 3 {
		t.Fatal(err, len(da), len(db))
	}
	if got := strings.Join(order, ""); got != "ab"+"ab"+"ba"+"ab" {
		t.Fatalf("order %s", got)
	}
}
