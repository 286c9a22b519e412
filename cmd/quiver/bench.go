package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/quiver-mcp/quiver/benchmarks"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure quiver on real catalogs: routing recall and latency",
	}

	var opts benchmarks.RouteOptions
	var ks string
	var asJSON bool
	route := &cobra.Command{
		Use:   "route",
		Short: "Route labelled queries over a catalog: recall@k, MRR, build time, latency, peak memory",
		Long: `Route every labelled query of --queries over the tools of --catalog and print, per query
source: qids, recall@k (per qid over its gold tools), MRR, index build time, Search latency
p50/p99 and the process's peak memory. --scale N routes over a synthetic catalog N times the
size (servers cloned under new names with seeded perturbation); recall still counts the
original gold tools. Progress goes to stderr.`,
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
			opts.Progress = cmd.ErrOrStderr()
			rs, err := benchmarks.RunRoute(cmd.Context(), opts)
			if err != nil {
				return usageError(err)
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
	f.StringVar(&opts.Queries, "queries", "", "labelled queries: JSON Lines of {source, qid, query, server, tool, alt_servers?, unresolved?}")
	f.StringVar(&ks, "k", "1,5,10", "comma-separated cut-offs for recall@k")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per query source")
	f.IntVar(&opts.Scale, "scale", 1, "route over a synthetic catalog this many times the size")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the synthetic catalog")
	f.IntVar(&opts.Rounds, "rounds", 3, "time every query this many times")

	cmd.AddCommand(route)
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
