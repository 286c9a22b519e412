package main

import (
	"encoding/json"
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
