package benchmarks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/toolid"
)

func TestLoadQueries(t *testing.T) {
	qs, err := LoadQueries("testdata/route-queries.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// o:2 has only unresolved golds and is skipped; s:3's duplicate gold
	// counts once; o:1 keeps its resolved gold only.
	var got []string
	for _, q := range qs {
		got = append(got, q.QID+"/"+strings.Repeat("g", len(q.Golds)))
	}
	want := []string{"s:1/g", "s:2/g", "s:3/gg", "o:1/g"}
	if !slices.Equal(got, want) {
		t.Fatalf("qids %v, want %v", got, want)
	}
	if !slices.Equal(Sources(qs), []string{"small", "other"}) {
		t.Fatalf("sources %v", Sources(qs))
	}
	if !qs[1].Golds[0].Matches("bank-mirror", "retrieveBalance") || qs[1].Golds[0].Matches("bank-mirror", "add") ||
		qs[1].Golds[0].Matches("math", "retrieveBalance") {
		t.Fatal("alt_servers matching")
	}
	if _, err := LoadQueries("testdata/missing.jsonl"); err == nil {
		t.Fatal("missing file: want an error")
	}
}

func item(server, name string) *catalog.Item {
	return &catalog.Item{ID: server + ":" + name, Server: server, UpstreamName: name}
}

func TestScore(t *testing.T) {
	qs := []Query{
		{QID: "a", Golds: []Gold{{Server: "s", Tool: "x"}}},
		{QID: "b", Golds: []Gold{{Server: "s", Tool: "x"}, {Server: "t", Tool: "y", AltServers: []string{"u"}}}},
		{QID: "c", Golds: []Gold{{Server: "s", Tool: "z"}}},
	}
	ranked := [][]router.Hit{
		{{Item: item("s", "x")}}, // rank 1
		{{Item: item("q", "q")}, {Item: item("u", "y")}, {Item: item("s", "x")}},                         // ranks 2 and 3
		{{Item: item("s", "x")}, {Item: item("t", "z")}, {Item: item("s", "y")}, {Item: item("q", "q")}}, // miss
	}
	s := Score(qs, ranked, []int{10, 1, 2})
	want := map[int]float64{1: 1.0 / 3, 2: (1 + 0.5) / 3, 10: (1 + 1) / 3.0}
	for k, w := range want {
		if d := s.Recall[k] - w; d > 1e-9 || d < -1e-9 {
			t.Errorf("recall@%d = %v, want %v", k, s.Recall[k], w)
		}
	}
	if d := s.MRR - (1+0.5)/3; d > 1e-9 || d < -1e-9 {
		t.Errorf("MRR %v", s.MRR)
	}
	if s.QIDs != 3 {
		t.Errorf("qids %d", s.QIDs)
	}
}

func TestSynthesize(t *testing.T) {
	src, err := catalog.LoadFile("testdata/route-tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	a, origin := Synthesize(src, 10, 7)
	b, _ := Synthesize(src, 10, 7)
	c, _ := Synthesize(src, 10, 8)
	if len(a.Tools) != 10*len(src.Tools) {
		t.Fatalf("x10 of %d tools: %d", len(src.Tools), len(a.Tools))
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	jc, _ := json.Marshal(c)
	if !bytes.Equal(ja, jb) {
		t.Fatal("same seed, different catalogs")
	}
	if bytes.Equal(ja, jc) {
		t.Fatal("different seeds, same catalog")
	}
	if !slices.EqualFunc(a.Tools[:len(src.Tools)], src.Tools, func(x, y catalog.ToolDef) bool { return x.Server == y.Server && x.Name == y.Name }) {
		t.Fatal("the original tools must come first, unchanged")
	}
	for _, tl := range a.Tools[len(src.Tools):] {
		if slices.ContainsFunc(src.Tools, func(o catalog.ToolDef) bool { return o.Server == tl.Server }) {
			t.Fatalf("clone kept an original server name: %s", tl.Server)
		}
		if !slices.ContainsFunc(src.Tools, func(o catalog.ToolDef) bool { return o.Server == origin[tl.Server] && o.Name == tl.Name }) {
			t.Fatalf("clone %s/%s: no original %q", tl.Server, tl.Name, origin[tl.Server])
		}
	}
	cards, _ := choicecard.NewDefaultBuilder()
	snap, rep, err := catalog.Ingest(a, catalog.Options{Cards: cards})
	if err != nil || rep.Dropped != 0 {
		t.Fatalf("ingest of the synthetic catalog: %v, %d dropped", err, rep.Dropped)
	}
	if len(snap.Items(toolid.KindTool)) != len(a.Tools) {
		t.Fatal("synthetic tools lost at ingest")
	}
	if one, _ := Synthesize(src, 1, 1); len(one.Tools) != len(src.Tools) {
		t.Fatal("scale 1 must be the catalog itself")
	}
}

func TestRunRoute(t *testing.T) {
	for _, scale := range []int{1, 3} {
		var progress bytes.Buffer
		rs, err := RunRoute(context.Background(), RouteOptions{
			Catalog: "testdata/route-tools.jsonl", Queries: "testdata/route-queries.jsonl",
			Ks: []int{5, 1}, Scale: scale, Rounds: 2, Progress: &progress,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 || rs[0].Source != "small" || rs[1].Source != "other" {
			t.Fatalf("results %+v", rs)
		}
		r := rs[0]
		if r.QIDs != 3 || (scale == 1 && r.Recall[1] < 0.5) || r.Recall[5] != 1 || r.Searches != 6 || r.Scale != scale || r.PeakRSSMB <= 0 {
			t.Errorf("scale %d: %+v", scale, r)
		}
		if (scale > 1) != (r.CloneRecall != nil) || (scale > 1 && r.CloneRecall[5] < r.Recall[5]) {
			t.Errorf("scale %d: clone recall %v", scale, r.CloneRecall)
		}
		if progress.Len() == 0 {
			t.Error("no progress lines")
		}
		var obj map[string]any
		js, err := json.Marshal(r)
		if err != nil || json.Unmarshal(js, &obj) != nil {
			t.Fatalf("json %s: %v", js, err)
		}
		for _, k := range []string{"source", "qids", "recall@1", "recall@5", "mrr", "p50_ms", "p99_ms", "build_ms", "peak_rss_mb", "tools"} {
			if _, ok := obj[k]; !ok {
				t.Errorf("json lacks %q: %s", k, js)
			}
		}
		var table bytes.Buffer
		if err := WriteRouteTable(&table, rs); err != nil || !strings.Contains(table.String(), "R@5") {
			t.Errorf("table: %v\n%s", err, table.String())
		}
	}
	if _, err := RunRoute(context.Background(), RouteOptions{Catalog: "testdata/route-tools.jsonl", Queries: "testdata/route-queries.jsonl", Ks: []int{0}}); err == nil {
		t.Error("k=0: want an error")
	}
}

// TestRouteReal runs the full benchmark on the shared data when
// QUIVER_BENCH_ROUTE=1 (QUIVER_BENCH_SCALE=N for a synthetic catalog) and
// prints the JSON lines; `quiver bench route` is the usual way.
func TestRouteReal(t *testing.T) {
	if os.Getenv("QUIVER_BENCH_ROUTE") == "" {
		t.Skip("set QUIVER_BENCH_ROUTE=1")
	}
	scale := 1
	if s := os.Getenv("QUIVER_BENCH_SCALE"); s != "" {
		if _, err := fmt.Sscan(s, &scale); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := RunRoute(context.Background(), RouteOptions{
		Catalog: "../../shared/data/tools.jsonl", Queries: "../../shared/data/queries.jsonl",
		Scale: scale, Seed: 1, Rounds: 3, Progress: os.Stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		js, _ := json.Marshal(r)
		t.Log(string(js))
	}
	_ = WriteRouteTable(os.Stdout, rs)
}

// TestRouteSplitAndDiff runs two query files with a tune source, reads the
// JSON back and checks the before/after table and the recall plot.
func TestRouteSplitAndDiff(t *testing.T) {
	rs, err := RunRoute(context.Background(), RouteOptions{
		Catalog: "testdata/route-tools.jsonl", Queries: "testdata/route-queries.jsonl, testdata/route-queries-blind.jsonl",
		Ks: []int{1, 2, 3}, TuneOn: "small",
	})
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, r := range rs {
		roles[r.Source] = r.Role
	}
	if want := map[string]string{"small": "tune", "other": "report", "blind": "blind"}; !maps.Equal(roles, want) {
		t.Fatalf("roles %v, want %v", roles, want)
	}
	var js bytes.Buffer
	for _, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		js.Write(append(b, '\n'))
	}
	back, err := ReadRouteResults(&js)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rs) || back[0].Source != rs[0].Source || back[0].Role != "tune" ||
		!slices.Equal(back[0].Ks, []int{1, 2, 3}) || back[0].Recall[3] != round(rs[0].Recall[3], 4) {
		t.Fatalf("read back %+v from %+v", back, rs)
	}
	worse := slices.Clone(back)
	worse[0].Recall = map[int]float64{1: 0, 2: 0, 3: 0}
	var diff bytes.Buffer
	if err := WriteRouteDiff(&diff, worse, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff.String(), fmt.Sprintf("%+7.3f", round(rs[0].Recall[3], 4))) {
		t.Errorf("diff lacks the change of R@3:\n%s", diff.String())
	}
	var svg bytes.Buffer
	if err := WriteRecallSVG(&svg, back, rs); err != nil {
		t.Fatal(err)
	}
	if s := svg.String(); !strings.HasPrefix(s, "<svg") || strings.Count(s, "<polyline") != 2*len(rs) {
		t.Errorf("svg: %d polylines", strings.Count(s, "<polyline"))
	}
	if _, err := ReadRouteResults(strings.NewReader("{\"source\":\"x\"}\n")); err == nil {
		t.Error("a line without recall@k: want an error")
	}
}

// FuzzReadRouteResults: any input reads back or fails with an error.
func FuzzReadRouteResults(f *testing.F) {
	f.Add(`{"source":"a","role":"tune","qids":3,"recall@5":0.5,"mrr":0.25}` + "\n")
	f.Add(`{"source":"a","recall@x":1}`)
	f.Add("\n\n{}")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ReadRouteResults(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.Source == "" || len(r.Ks) == 0 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}
