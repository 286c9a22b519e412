package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/benchmarks"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure quiver on real catalogs: routing, token savings, overhead and scale",
	}

	var opts benchmarks.RouteOptions
	var ks, beforeFile, plotFile string
	var asJSON bool
	route := &cobra.Command{
		Use:   "route",
		Short: "Route labelled queries over a catalog: recall@k, MRR, build time, latency, peak memory",
		Long: `Route every labelled query of --queries over the tools of --catalog and print, per query
source: qids, recall@k (per qid over its gold tools), MRR, index build time, Search latency
p50/p99 and the process's peak memory. --scale N routes over a synthetic catalog N times the
size (servers cloned under new names with seeded perturbation); recall still counts the
original gold tools. --queries takes several files separated by commas; --tune-on names the
source used for tuning (its role is "tune", "blind" stays "blind", the others are "report").
--before FILE (an earlier --json output) adds a before/after table on stderr and, with
--plot FILE, an SVG of recall@k for every k before and after. Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Catalog == "" || opts.Queries == "" {
				return usageError(errors.New("--catalog FILE and --queries FILE are required"))
			}
			parsed, err := parseKs(ks)
			if err != nil {
				return usageError(err)
			}
			opts.Ks = parsed
			if opts.Scale < 1 {
				return usageError(fmt.Errorf("--scale %d: want 1 or more", opts.Scale))
			}
			if opts.Rounds < 1 {
				return usageError(fmt.Errorf("--rounds %d: want 1 or more", opts.Rounds))
			}
			var before []benchmarks.RouteResult
			if beforeFile != "" {
				f, err := os.Open(beforeFile)
				if err != nil {
					return usageError(err)
				}
				before, err = benchmarks.ReadRouteResults(f)
				f.Close()
				if err != nil {
					return usageError(fmt.Errorf("--before %s: %w", beforeFile, err))
				}
			}
			opts.Progress = cmd.ErrOrStderr()
			rs, err := benchmarks.RunRoute(cmd.Context(), opts)
			if err != nil {
				return usageError(err)
			}
			if before != nil {
				if err := benchmarks.WriteRouteDiff(cmd.ErrOrStderr(), before, rs); err != nil {
					return err
				}
			}
			if plotFile != "" {
				if err := writeFile(plotFile, func(w io.Writer) error { return benchmarks.WriteRecallSVG(w, before, rs) }); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if !asJSON {
				return benchmarks.WriteRouteTable(out, rs)
			}
			return writeLines(out, func(emit func(any) error) error {
				for _, r := range rs {
					if err := emit(r); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f := route.Flags()
	f.StringVar(&opts.Catalog, "catalog", "", "catalog file: JSON Lines of tools, a tools/list result, or a snapshot object")
	f.StringVar(&opts.Queries, "queries", "", "labelled queries, files separated by commas: JSON Lines of {source, qid, query, server, tool, alt_servers?, unresolved?}")
	f.StringVar(&opts.TuneOn, "tune-on", "", "the query source tuning used; the others are reported as held out")
	f.StringVar(&beforeFile, "before", "", "an earlier --json output to compare with")
	f.StringVar(&plotFile, "plot", "", "write an SVG of recall@k, before (with --before) and after")
	f.StringVar(&ks, "k", "1,5,10", "comma-separated cut-offs for recall@k")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per query source")
	f.IntVar(&opts.Scale, "scale", 1, "route over a synthetic catalog this many times the size")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the synthetic catalog")
	f.IntVar(&opts.Rounds, "rounds", 3, "time every query this many times")

	cmd.AddCommand(route)
	cmd.AddCommand(newBenchTokensCmd())
	cmd.AddCommand(newBenchOverheadCmd())
	cmd.AddCommand(newBenchMemprobeCmd())
	return cmd
}

// parseKs parses "1,5,10".
func parseKs(s string) ([]int, error) {
	var ks []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		k, err := strconv.Atoi(p)
		if err != nil || k < 1 {
			return nil, fmt.Errorf("--k %q: want positive integers separated by commas", s)
		}
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		return nil, fmt.Errorf("--k %q: want at least one cut-off", s)
	}
	return ks, nil
}

// defaultSharedCatalog is where a clone of the repository finds the shared
// data (the repository's README: shared/ sits beside the clone).
const defaultSharedCatalog = "../shared/data/tools.jsonl"

func newBenchTokensCmd() *cobra.Command {
	var (
		opts          benchmarks.TokensOptions
		sizes, ks     string
		asJSON        bool
		plot, outJSON string
		selfQueries   bool
	)
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Context tokens: full tools/list vs proxy vs gateway (browse -> hydrate), over catalog sizes; firewall savings",
		Long: `Serve --catalog from an in-process runtime and count, in cl100k_base tokens, what an MCP client
puts in the prompt: the baseline (every upstream's full tools/list), proxy mode's stripped
tools/list, and gateway mode's meta-tools plus one tool_browse (per --k) and one tool_hydrate
answer, for every labelled query of --queries (default: queries.jsonl beside the catalog, if
any; else queries made from the catalog's descriptions), with recall@k of the browse. Catalog
samples of --sizes tools are drawn whole server by whole server (seeded). Large results (logs,
JSON, CSV) go through tool_execute to measure the firewall. Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Catalog == "" {
				return usageError(errors.New("--catalog FILE is required"))
			}
			var err error
			if opts.Sizes, err = parseInts("--sizes", sizes); err != nil {
				return usageError(err)
			}
			if opts.TopKs, err = parseInts("--k", ks); err != nil {
				return usageError(err)
			}
			if opts.Queries == "" && !selfQueries {
				beside := filepath.Join(filepath.Dir(opts.Catalog), "queries.jsonl")
				if _, err := os.Stat(beside); err == nil {
					opts.Queries = beside
					fmt.Fprintf(cmd.ErrOrStderr(), "queries: %s\n", beside)
				}
			}
			if selfQueries {
				opts.Queries = ""
			}
			opts.Progress = cmd.ErrOrStderr()
			rep, err := benchmarks.RunTokens(cmd.Context(), opts)
			if err != nil {
				return usageError(err)
			}
			return emitReport(cmd.OutOrStdout(), rep, reportOutputs{plot: plot, outJSON: outJSON, asJSON: asJSON},
				benchmarks.WriteSavingsSVG, benchmarks.WriteTokensTable)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Catalog, "catalog", "", "catalog file: JSON Lines of tools, a tools/list result, or a snapshot object")
	f.StringVar(&opts.Queries, "queries", "", "labelled queries (default: queries.jsonl beside the catalog, if present)")
	f.BoolVar(&selfQueries, "self-queries", false, "use queries made from the catalog's own descriptions, even if a query file is beside it")
	f.StringVar(&sizes, "sizes", "50,100,500,1000,3641", "catalog sizes of the curve, in tools (capped to the catalog)")
	f.StringVar(&ks, "k", "5,10", "browse top_k values")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the by-server sampling")
	f.BoolVar(&opts.NoFirewall, "no-firewall", false, "skip the firewall savings")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&outJSON, "out", "", "also write the JSON report to this file")
	f.StringVar(&plot, "plot", "", "write the savings curve as SVG to this file")
	return cmd
}

func newBenchOverheadCmd() *cobra.Command {
	var (
		opts                 benchmarks.OverheadOptions
		clients, startup     string
		asJSON, noMemory     bool
		plot, outJSON, probe string
		stateList, redisURL  string
	)
	cmd := &cobra.Command{
		Use:   "overhead",
		Short: "Latency, throughput, memory and start-up: direct vs through quiver, over stdio and HTTP",
		Long: `Make the same tool calls directly to an upstream and through an in-process quiver runtime,
interleaved A/B, over stdio and streamable HTTP on 127.0.0.1: latency p50/p99 for a small and a
large result, tool_browse latency, sustained calls/s with concurrent clients (against the
testdata/upstream server and against a go-sdk server in this process), RSS with 1k, 3.6k and
36k tools (each in a fresh process), start-up time with N stdio upstreams, and start-up and
call latency of one stdio upstream without and with the sandbox (bwrap). The upstream
is testdata/upstream, built with the go command unless --upstream-bin is given. --catalog
(default ` + defaultSharedCatalog + ` when present) is served beside the live upstreams.
Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if stateList != "" {
				// The state backends compared, instead of the other runs.
				so := benchmarks.StateOverheadOptions{RedisURL: redisURL, Calls: opts.Calls, Duration: opts.Duration, Progress: cmd.ErrOrStderr()}
				for _, b := range strings.Split(stateList, ",") {
					if b = strings.TrimSpace(b); b != "" {
						so.Backends = append(so.Backends, b)
					}
				}
				if len(so.Backends) == 1 && so.Backends[0] != "embedded" {
					so.Backends = append([]string{"embedded"}, so.Backends...)
				}
				if cs, err := parseInts("--clients", clients); err == nil && len(cs) == 1 {
					so.Clients = cs[0]
				} else if cmd.Flags().Changed("clients") {
					return usageError(errors.New("--clients: give one number with --state"))
				}
				rep, err := benchmarks.RunStateOverhead(cmd.Context(), so)
				if err != nil {
					return usageError(err)
				}
				return emitReport(cmd.OutOrStdout(), rep, reportOutputs{outJSON: outJSON, asJSON: asJSON}, nil, benchmarks.WriteStateTable)
			}
			if opts.Clients, err = parseInts("--clients", clients); err != nil {
				return usageError(err)
			}
			if opts.StartupUpstreams, err = parseInts("--startup", startup); err != nil && startup != "0" {
				return usageError(err)
			}
			if startup == "0" {
				opts.StartupUpstreams = []int{0}
			}
			if opts.Duration < 0 || opts.Calls < 0 || opts.LargeCalls < 0 || opts.BrowseCalls < 0 || opts.Warmup < 0 {
				return usageError(errors.New("counts and durations must not be negative"))
			}
			if !cmd.Flags().Changed("catalog") {
				if _, err := os.Stat(defaultSharedCatalog); err == nil {
					opts.Catalog = defaultSharedCatalog
					fmt.Fprintf(cmd.ErrOrStderr(), "catalog: %s\n", defaultSharedCatalog)
				}
			}
			if opts.Catalog != "" && opts.Queries == "" {
				beside := filepath.Join(filepath.Dir(opts.Catalog), "queries.jsonl")
				if _, err := os.Stat(beside); err == nil {
					opts.Queries = beside
				}
			}
			if !noMemory && opts.Catalog != "" {
				if probe == "" {
					if probe, err = os.Executable(); err != nil {
						return fmt.Errorf("memory probes: %w", err)
					}
				}
				opts.ProbeCommand = []string{probe, "bench", "memprobe"}
			}
			opts.Progress = cmd.ErrOrStderr()
			rep, err := benchmarks.RunOverhead(cmd.Context(), opts)
			if err != nil {
				return usageError(err)
			}
			return emitReport(cmd.OutOrStdout(), rep, reportOutputs{plot: plot, outJSON: outJSON, asJSON: asJSON},
				benchmarks.WriteLatencySVG, benchmarks.WriteOverheadTable)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.UpstreamBin, "upstream-bin", "", "a built testdata/upstream binary (default: go build it into a temporary directory)")
	f.StringVar(&opts.Catalog, "catalog", "", "catalog served beside the live upstreams, for browse latency and the memory probes (default "+defaultSharedCatalog+" when present)")
	f.StringVar(&opts.Queries, "queries", "", "browse queries (default: queries.jsonl beside the catalog)")
	f.IntVar(&opts.Calls, "calls", 2000, "timed calls per path, small result")
	f.IntVar(&opts.LargeCalls, "large-calls", 300, "timed calls per path, large result")
	f.IntVar(&opts.BrowseCalls, "browse-calls", 1000, "timed tool_browse calls per transport")
	f.IntVar(&opts.Warmup, "warmup", 50, "untimed calls per path before timing")
	f.IntVar(&opts.LargeLines, "large-lines", 2000, "log lines of the large result (big_log)")
	f.StringVar(&clients, "clients", "1,8,64", "concurrent clients of the throughput runs")
	f.DurationVar(&opts.Duration, "duration", 3*time.Second, "length of each throughput run")
	f.StringSliceVar(&opts.Protocols, "protocols", []string{"2026-07-28", "2025-11-25"}, "MCP revisions of the throughput clients, each run apart (2026-07-28: sessionless)")
	f.StringVar(&startup, "startup", "1,8,32", "numbers of stdio upstreams of the start-up runs (0: skip)")
	f.IntVar(&opts.SandboxStarts, "sandbox-starts", 10, "start-ups per sandbox mode of the sandbox comparison (-1: skip it)")
	f.IntVar(&opts.SandboxCalls, "sandbox-calls", 500, "timed echo calls per sandbox mode")
	f.BoolVar(&noMemory, "no-memory", false, "skip the memory probes")
	f.BoolVar(&opts.NoThroughput, "no-throughput", false, "skip the throughput runs")
	f.BoolVar(&opts.NoLatency, "no-latency", false, "skip the latency and browse runs")
	f.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the busiest throughput run through quiver to this file")
	f.StringVar(&opts.HeapProfile, "heapprofile", "", "write a heap profile of the largest memory probe to this file")
	f.StringVar(&probe, "probe-bin", "", "quiver binary that runs the memory probes (default: this executable)")
	_ = f.MarkHidden("probe-bin")
	f.IntVar(&opts.UpstreamIdleConns, "experiment-upstream-idle-conns", 0, "experiment: let quiver's upstream HTTP clients keep this many idle connections per host (default transport: 2)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&outJSON, "out", "", "also write the JSON report to this file")
	f.StringVar(&plot, "plot", "", "write the latency distributions as SVG to this file")
	f.StringVar(&stateList, "state", "", "instead: compare state backends, the first as reference ("+strings.Join(benchmarks.StateBackends, ",")+"; one backend alone is compared with embedded)")
	f.StringVar(&redisURL, "redis-url", "", "with --state: the Redis to use (default: start redis-server on a free loopback port)")
	return cmd
}

// newBenchMemprobeCmd is the child side of the memory figures: it reads
// benchmarks.MemoryProbeOptions as JSON on stdin and writes the result.
func newBenchMemprobeCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "memprobe",
		Short:  "Internal: one memory probe (options as JSON on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if err := benchmarks.RunMemoryProbe(ctx, cmd.InOrStdin(), cmd.OutOrStdout()); err != nil {
				return usageError(err)
			}
			return nil
		},
	}
}

// parseInts parses "1,8,64" into positive integers.
func parseInts(flag, s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s %q: want positive integers separated by commas", flag, s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %q: want at least one value", flag, s)
	}
	return out, nil
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// writeFile creates path (and its directory) and writes it with fn.
func writeFile(path string, fn func(io.Writer) error) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// reportOutputs are where a bench report goes besides the terminal.
type reportOutputs struct {
	plot, outJSON string
	asJSON        bool
}

// emitReport writes the plot and the JSON file when asked, then prints the
// report as JSON or as a table.
func emitReport[R any](out io.Writer, rep R, o reportOutputs, svg, table func(io.Writer, R) error) error {
	if o.plot != "" {
		if err := writeFile(o.plot, func(w io.Writer) error { return svg(w, rep) }); err != nil {
			return err
		}
	}
	if o.outJSON != "" {
		if err := writeFile(o.outJSON, func(w io.Writer) error { return writeIndented(w, rep) }); err != nil {
			return err
		}
	}
	if o.asJSON {
		return writeIndented(out, rep)
	}
	return table(out, rep)
}
