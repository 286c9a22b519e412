package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const (
	benchTools   = "../../benchmarks/testdata/route-tools.jsonl"
	benchQueries = "../../benchmarks/testdata/route-queries.jsonl"
)

func TestBenchRouteJSON(t *testing.T) {
	code, out, errs := runCLI(t, "bench", "route", "--catalog", benchTools, "--queries", benchQueries, "--json", "--k", "1,5", "--rounds", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one JSON line per source, got:\n%s", out)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"source", "qids", "recall@1", "recall@5", "mrr", "p50_ms", "p99_ms", "build_ms", "peak_rss_mb", "tools"} {
		if _, ok := first[k]; !ok {
			t.Errorf("missing %q in %s", k, lines[0])
		}
	}
	if first["source"] != "small" || first["recall@5"] != 1.0 {
		t.Errorf("first line %s", lines[0])
	}
	if !strings.Contains(errs, "index built") {
		t.Errorf("no progress on stderr: %q", errs)
	}
}

func TestBenchRouteTable(t *testing.T) {
	code, out, errs := runCLI(t, "bench", "route", "--catalog", benchTools, "--queries", benchQueries, "--scale", "2", "--rounds", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"source", "R@5", "cR@5", "small", "other"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchRouteUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "route"},
		{"bench", "route", "--catalog", benchTools},
		{"bench", "route", "--catalog", benchTools, "--queries", benchQueries, "--k", "0"},
		{"bench", "route", "--catalog", benchTools, "--queries", benchQueries, "--k", "x"},
		{"bench", "route", "--catalog", benchTools, "--queries", benchQueries, "--k", "51"},
		{"bench", "route", "--catalog", benchTools, "--queries", benchQueries, "--scale", "0"},
		{"bench", "route", "--catalog", "testdata/nonexistent.jsonl", "--queries", benchQueries},
		{"bench", "route", "--catalog", benchTools, "--queries", benchQueries, "--bogus"},
	} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

const tokensTools = "../../benchmarks/testdata/tokens-tools.jsonl"

func TestBenchTokens(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "bench", "tokens", "--catalog", benchTools, "--queries", benchQueries, "--sizes", "2,100",
		"--k", "5", "--no-firewall", "--json", "--plot", dir+"/savings.svg", "--out", dir+"/tokens.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Sizes []struct {
			Tools          int `json:"tools"`
			BaselineTokens int `json:"baseline_tokens"`
			ProxyTokens    int `json:"proxy_tokens"`
			Gateway        []struct {
				TopK          int               `json:"top_k"`
				GatewayTokens float64           `json:"gateway_tokens"`
				ReductionPct  float64           `json:"reduction_pct"`
				Sources       []json.RawMessage `json:"sources"`
			} `json:"gateway"`
		} `json:"sizes"`
		Goals []map[string]any `json:"goals"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Sizes) != 2 || rep.Sizes[1].Tools != 6 || rep.Sizes[1].BaselineTokens == 0 || rep.Sizes[1].Gateway[0].TopK != 5 {
		t.Fatalf("report %s", out)
	}
	if !strings.Contains(string(rep.Sizes[1].Gateway[0].Sources[0]), `"recall@5"`) {
		t.Errorf("sources %s", rep.Sizes[1].Gateway[0].Sources[0])
	}
	for _, f := range []string{"savings.svg", "tokens.json"} {
		if b, err := os.ReadFile(dir + "/" + f); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(errs, "size 6") {
		t.Errorf("no progress on stderr: %q", errs)
	}
	// The readable table; queries.jsonl is not beside this catalog, so
	// queries come from its own descriptions.
	code, out, errs = runCLI(t, "bench", "tokens", "--catalog", tokensTools, "--sizes", "5", "--no-firewall")
	if code != 0 || !strings.Contains(out, "baseline") || !strings.Contains(out, "self") {
		t.Fatalf("exit %d: %s\n%s", code, out, errs)
	}
}

func TestBenchOverheadSmoke(t *testing.T) {
	code, out, errs := runCLI(t, "bench", "overhead", "--upstream-bin", upstreamBin, "--probe-bin", quiverBin,
		"--catalog", benchTools, "--queries", benchQueries, "--calls", "4", "--large-calls", "2", "--browse-calls", "4",
		"--warmup", "1", "--large-lines", "200", "--clients", "1,2", "--duration", "100ms", "--startup", "1",
		"--sandbox-starts", "1", "--sandbox-calls", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Latency    []map[string]any `json:"latency"`
		Throughput []map[string]any `json:"throughput"`
		Memory     []map[string]any `json:"memory"`
		Startup    []map[string]any `json:"startup"`
		Goals      []map[string]any `json:"goals"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Latency) != 4 || len(rep.Throughput) != 12 || len(rep.Memory) != 3 || len(rep.Startup) != 1 || len(rep.Goals) != 3 {
		t.Fatalf("report %s", out)
	}
	for _, k := range []string{"added_p50_ms", "added_p99_ms", "ratio_p50", "direct_p50_ms", "quiver_p99_ms"} {
		if _, ok := rep.Latency[0][k]; !ok {
			t.Errorf("latency lacks %q", k)
		}
	}
	if rep.Memory[2]["scale"] != 10.0 || rep.Memory[2]["tools"].(float64) < 50 {
		t.Errorf("x10 memory probe %v", rep.Memory[2])
	}
}

func TestBenchScaleUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "tokens"},
		{"bench", "tokens", "--catalog", benchTools, "--sizes", "0"},
		{"bench", "tokens", "--catalog", benchTools, "--k", "51"},
		{"bench", "tokens", "--catalog", "testdata/nonexistent.jsonl"},
		{"bench", "overhead", "--clients", "x"},
		{"bench", "overhead", "--calls", "-1"},
		{"bench", "overhead", "--bogus"},
	} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
