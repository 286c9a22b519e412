package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/toolid"
)

// RouteOptions configure RunRoute.
type RouteOptions struct {
	// Catalog is the catalog file to load (see LoadCatalog); Queries one
	// or more labelled query files, separated by commas (see LoadQueries),
	// read in order.
	Catalog string
	Queries string
	// TuneOn names the query source that tuning used (see
	// benchmarks/routing-protocol.md): its result has Role "tune", the
	// source "blind" has Role "blind", every other source Role "report".
	// Empty leaves Role empty.
	TuneOn string
	// Ks are the cut-offs of recall@k; empty means 1, 5, 10. Every k must
	// be in 1..router.MaxTopK.
	Ks []int
	// Scale > 1 routes over a synthetic catalog Scale times the size (see
	// Synthesize); recall still counts the original gold tools, and
	// CloneRecall also counts their clones.
	Scale int
	// Seed seeds the synthetic catalog.
	Seed uint64
	// Rounds is how many times every query is timed (at least 1); recall
	// is scored on the first round.
	Rounds int
	// Index configures the router index.
	Index router.IndexOptions
	// Progress, when set, receives one line per step.
	Progress io.Writer
}

// RouteResult is the outcome of one query source.
type RouteResult struct {
	Source string
	// Role is the source's side of the tune/report split (see TuneOn).
	Role string
	QIDs int
	// Recall maps k to recall@k (see Score); Ks lists the ks in order.
	Recall map[int]float64
	Ks     []int
	MRR    float64
	// Fallbacks counts the queries answered by the router's never-empty
	// fallback (every hit LowConfidence: no word matched as written);
	// RecallNoFallback is recall@k with those answers emptied, as the
	// router answered them before the fallback existed.
	Fallbacks        int
	RecallNoFallback map[int]float64
	// CloneRecall (scale > 1 only) is recall@k where a clone of a gold
	// tool (same name on a clone of the gold server) is a hit too.
	CloneRecall map[int]float64
	// P50Ms and P99Ms are Search latencies over every timed query.
	P50Ms, P99Ms float64
	// Searches is the number of timed Search calls, GCs the number of
	// garbage collections that ran while they did.
	Searches int
	GCs      uint32
	// BuildMs is the router index build time; IngestMs the catalog ingest
	// time (tool_ids, schemas, cards) before it.
	BuildMs, IngestMs float64
	// PeakRSSMB is the process's peak resident set (VmHWM) over the whole
	// run, ingest included, or the Go runtime's memory from the OS where
	// /proc is absent.
	PeakRSSMB float64
	// BuildPeakRSSMB is the peak resident set while the index was built:
	// the high-water mark is reset after ingest (the catalog stays
	// resident, as in a serving process) and read after the build. 0 where
	// /proc/self/clear_refs is unavailable.
	BuildPeakRSSMB float64
	Tools          int
	Servers        int
	Scale          int
}

// MarshalJSON writes the flat object of `quiver bench route --json`:
// {"source","qids","recall@1",...,"mrr","p50_ms","p99_ms","build_ms",...}.
func (r RouteResult) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	put := func(k string, v any) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		switch x := v.(type) {
		case float64:
			b.WriteString(strconv.FormatFloat(round(x, 4), 'f', -1, 64))
		default:
			vb, _ := json.Marshal(x)
			b.Write(vb)
		}
	}
	put("source", r.Source)
	if r.Role != "" {
		put("role", r.Role)
	}
	put("qids", r.QIDs)
	for _, k := range r.Ks {
		put("recall@"+strconv.Itoa(k), r.Recall[k])
	}
	put("mrr", r.MRR)
	put("fallbacks", r.Fallbacks)
	for _, k := range r.Ks {
		if v, ok := r.RecallNoFallback[k]; ok {
			put("recall_no_fallback@"+strconv.Itoa(k), v)
		}
	}
	if r.CloneRecall != nil {
		for _, k := range r.Ks {
			put("clone_recall@"+strconv.Itoa(k), r.CloneRecall[k])
		}
	}
	put("p50_ms", r.P50Ms)
	put("p99_ms", r.P99Ms)
	put("searches", r.Searches)
	put("gcs", r.GCs)
	put("build_ms", r.BuildMs)
	put("ingest_ms", r.IngestMs)
	put("peak_rss_mb", r.PeakRSSMB)
	put("build_peak_rss_mb", r.BuildPeakRSSMB)
	put("tools", r.Tools)
	put("servers", r.Servers)
	put("scale", r.Scale)
	put("cpus", runtime.NumCPU())
	put("go", runtime.Version())
	b.WriteByte('}')
	return b.Bytes(), nil
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// RunRoute loads a catalog and labelled queries, builds the router index
// (over a synthetic catalog when Scale > 1), runs every query and returns
// recall, MRR, latency, build time and peak memory per query source, in
// the order the sources first appear in the query file.
func RunRoute(ctx context.Context, opts RouteOptions) ([]RouteResult, error) {
	ks := slices.Clone(opts.Ks)
	if len(ks) == 0 {
		ks = []int{1, 5, 10}
	}
	slices.Sort(ks)
	ks = slices.Compact(ks)
	for _, k := range ks {
		if k < 1 || k > router.MaxTopK {
			return nil, fmt.Errorf("k %d out of range 1..%d", k, router.MaxTopK)
		}
	}
	scale := max(opts.Scale, 1)
	rounds := max(opts.Rounds, 1)
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}

	var qs []Query
	for _, path := range strings.Split(opts.Queries, ",") {
		if path = strings.TrimSpace(path); path == "" {
			continue
		}
		q, err := LoadQueries(path)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q...)
	}
	if len(qs) == 0 {
		return nil, errors.New("no query file given")
	}
	src, err := loadSource(opts.Catalog)
	if err != nil {
		return nil, err
	}
	var origin map[string]string
	if scale > 1 {
		progress("synthesizing a x%d catalog from %d tools (seed %d)", scale, len(src.Tools), opts.Seed)
		src, origin = Synthesize(src, scale, opts.Seed)
	}
	progress("ingesting %d tools", len(src.Tools))
	t0 := time.Now()
	snap, err := IngestSource(src)
	if err != nil {
		return nil, err
	}
	ingest := time.Since(t0)
	items := snap.Items(toolid.KindTool)
	servers := map[string]bool{}
	for _, it := range items {
		servers[it.Namespace] = true
	}
	progress("ingested %d tools from %d servers in %s; building the index", len(items), len(servers), ingest.Round(time.Millisecond))

	// The build's peak is measured from here: the ingest's garbage is
	// collected and returned to the OS first, so that VmHWM starts at what
	// a serving process holds before it builds an index.
	debug.FreeOSMemory()
	ingestPeak := peakRSSMB()
	resetPeakRSS := resetPeakRSS()
	t0 = time.Now()
	x, err := router.NewIndex(items, opts.Index)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	build := time.Since(t0)
	buildPeak := 0.0
	if resetPeakRSS {
		buildPeak = peakRSSMB()
	}
	progress("index built in %s", build.Round(time.Millisecond))
	// Latency is measured in the steady state of a serving process: the
	// garbage of loading and building is collected first, as it would be
	// long before the first browse. Collections caused by the searches
	// themselves are counted (GCs) and stay in the figures.
	runtime.GC()

	kmax := ks[len(ks)-1]
	var out []RouteResult
	for _, source := range Sources(qs) {
		var set []Query
		for _, q := range qs {
			if q.Source == source {
				set = append(set, q)
			}
		}
		progress("source %s: %d queries x %d rounds", source, len(set), rounds)
		ranked := make([][]router.Hit, len(set))
		lat := make([]time.Duration, 0, len(set)*rounds)
		gc0 := numGC()
		for r := range rounds {
			for i, q := range set {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				t := time.Now()
				hits, err := x.Search(ctx, q.Text, kmax)
				d := time.Since(t)
				if err != nil && !errors.Is(err, router.ErrArgsInvalid) {
					return nil, fmt.Errorf("query %s: %w", q.QID, err)
				}
				lat = append(lat, d)
				if r == 0 {
					ranked[i] = hits
				}
			}
		}
		s := Score(set, ranked, ks)
		fallbacks := 0
		lexical := make([][]router.Hit, len(ranked))
		for i, hits := range ranked {
			if len(hits) > 0 && hits[0].LowConfidence {
				fallbacks++
				continue
			}
			lexical[i] = hits
		}
		var cloneRecall map[int]float64
		if origin != nil {
			cloneRecall = Score(set, asOriginals(ranked, origin), ks).Recall
		}
		role := ""
		switch {
		case opts.TuneOn == "":
		case source == opts.TuneOn:
			role = "tune"
		case source == "blind":
			role = "blind"
		default:
			role = "report"
		}
		out = append(out, RouteResult{
			Fallbacks: fallbacks, RecallNoFallback: Score(set, lexical, ks).Recall,
			Source: source, Role: role, BuildPeakRSSMB: buildPeak, QIDs: s.QIDs, Recall: s.Recall, Ks: ks, MRR: s.MRR, CloneRecall: cloneRecall,
			P50Ms: ms(percentile(lat, 0.50)), P99Ms: ms(percentile(lat, 0.99)), Searches: len(lat), GCs: numGC() - gc0,
			BuildMs: ms(build), IngestMs: ms(ingest),
			Tools: len(items), Servers: len(servers), Scale: scale,
		})
	}
	peak := max(peakRSSMB(), ingestPeak)
	for i := range out {
		out[i].PeakRSSMB = peak
	}
	return out, nil
}

// asOriginals returns ranked with every hit on a clone server moved to the
// clone's original server.
func asOriginals(ranked [][]router.Hit, origin map[string]string) [][]router.Hit {
	out := make([][]router.Hit, len(ranked))
	for i, hits := range ranked {
		out[i] = make([]router.Hit, len(hits))
		for j, h := range hits {
			out[i][j] = h
			if o, ok := origin[h.Item.Server]; ok {
				it := *h.Item
				it.Server = o
				out[i][j].Item = &it
			}
		}
	}
	return out
}

func numGC() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the nearest-rank percentile p (0..1) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// resetPeakRSS resets the process's VmHWM to its current resident set
// (Linux: "5" written to /proc/self/clear_refs) and reports whether it did.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSSMB returns VmHWM from /proc/self/status in MiB, or the Go
// runtime's memory obtained from the OS where /proc is absent.
func peakRSSMB() float64 {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				fields := strings.Fields(rest)
				if len(fields) > 0 {
					if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
						return round(kb/1024, 1)
					}
				}
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return round(float64(m.Sys)/(1<<20), 1)
}

// WriteRouteTable writes results as a readable table.
func WriteRouteTable(w io.Writer, rs []RouteResult) error {
	bw := bufio.NewWriter(w)
	if len(rs) == 0 {
		return bw.Flush()
	}
	fmt.Fprintf(bw, "%-14s %-6s %5s %6s %5s", "source", "role", "qids", "tools", "scale")
	for _, k := range rs[0].Ks {
		fmt.Fprintf(bw, " %7s", "R@"+strconv.Itoa(k))
	}
	clones := rs[0].CloneRecall != nil
	if clones {
		for _, k := range rs[0].Ks {
			fmt.Fprintf(bw, " %7s", "cR@"+strconv.Itoa(k))
		}
	}
	fmt.Fprintf(bw, " %6s %5s %9s %8s %8s %10s %8s %8s\n", "MRR", "fallb", "build_ms", "p50_ms", "p99_ms", "ingest_ms", "peak_MB", "build_MB")
	for _, r := range rs {
		role := r.Role
		if role == "" {
			role = "-"
		}
		fmt.Fprintf(bw, "%-14s %-6s %5d %6d %5d", r.Source, role, r.QIDs, r.Tools, r.Scale)
		for _, k := range r.Ks {
			fmt.Fprintf(bw, " %7.3f", r.Recall[k])
		}
		if clones {
			for _, k := range r.Ks {
				fmt.Fprintf(bw, " %7.3f", r.CloneRecall[k])
			}
		}
		fmt.Fprintf(bw, " %6.3f %5d %9.0f %8.3f %8.3f %10.0f %8.0f %8.0f\n", r.MRR, r.Fallbacks, r.BuildMs, r.P50Ms, r.P99Ms, r.IngestMs, r.PeakRSSMB, r.BuildPeakRSSMB)
	}
	return bw.Flush()
}
