package benchmarks

import (
	"bufio"
	"fmt"
	"io"
)

func goalLines(bw *bufio.Writer, goals []Goal) {
	if len(goals) == 0 {
		return
	}
	fmt.Fprintln(bw, "\nGoals:")
	for _, g := range goals {
		status := "not measured"
		if g.Met != nil {
			status = "MISSED"
			if *g.Met {
				status = "met"
			}
		}
		fmt.Fprintf(bw, "  %-52s %-34s %-7s %s\n", g.Name, g.Target, status, g.Measured)
	}
}

// WriteTokensTable writes a token report as readable tables.
func WriteTokensTable(w io.Writer, rep *TokensReport) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "catalog %s, queries %s, %s tokens, seed %d\n\n", rep.Catalog, rep.Queries, rep.Encoding, rep.Seed)
	fmt.Fprintf(bw, "%6s %7s %9s %9s %8s %5s", "tools", "servers", "baseline", "proxy", "proxy%", "meta")
	if len(rep.Sizes) > 0 {
		for _, g := range rep.Sizes[0].Gateway {
			fmt.Fprintf(bw, " %9s %8s", fmt.Sprintf("gw@%d", g.TopK), "of base")
		}
	}
	fmt.Fprintln(bw)
	for _, s := range rep.Sizes {
		fmt.Fprintf(bw, "%6d %7d %9d %9d %7.1f%% %5d", s.Tools, s.Servers, s.BaselineTokens, s.ProxyTokens, 100-s.ProxyReductionPct, s.MetaToolsTokens)
		for _, g := range s.Gateway {
			fmt.Fprintf(bw, " %9.0f %7.3f%%", g.GatewayTokens, g.PctOfBaseline)
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintln(bw, "\n(proxy% and \"of base\": share of the baseline tokens; gw = meta-tools + mean browse answer + mean hydrate answer)")

	fmt.Fprintf(bw, "\nPer query, browse -> hydrate (tokens include the meta-tools and the requests):\n")
	fmt.Fprintf(bw, "%6s %5s %-14s %5s %9s %8s %8s %8s %8s\n", "tools", "top_k", "source", "qids", "recall@k", "browse", "hydrate", "agent", "p95")
	for _, s := range rep.Sizes {
		for _, g := range s.Gateway {
			for _, src := range g.Sources {
				if src.QIDs == 0 {
					continue
				}
				fmt.Fprintf(bw, "%6d %5d %-14s %5d %9.3f %8.0f %8.0f %8.0f %8.0f\n", s.Tools, g.TopK, src.Source, src.QIDs, src.Recall,
					g.BrowseTokens, g.HydrateTokens, src.AgentTokensMean, g.AgentTokensP95)
			}
		}
	}
	if len(rep.Firewall) > 0 {
		fmt.Fprintf(bw, "\nFirewall (tool_execute answer vs the result itself):\n")
		fmt.Fprintf(bw, "%-22s %9s %9s %7s %9s %-8s\n", "result", "bytes", "original", "inline", "saved", "strategy")
		for _, f := range rep.Firewall {
			fmt.Fprintf(bw, "%-22s %9d %9d %7d %8.1f%% %-8s\n", f.Name, f.OriginalBytes, f.OriginalTokens, f.InlineTokens, f.ReductionPct, f.Strategy)
		}
	}
	goalLines(bw, rep.Goals)
	fmt.Fprintf(bw, "\n%d CPUs (%s), %s, %.1f s\n", rep.Machine.CPUs, rep.Machine.CPUModel, rep.Machine.Go, rep.Seconds)
	return bw.Flush()
}

// WriteOverheadTable writes an overhead report as readable tables.
func WriteOverheadTable(w io.Writer, rep *OverheadReport) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, rep.Setup)
	if len(rep.Latency) > 0 {
		fmt.Fprintf(bw, "\nLatency, direct vs through quiver (ms; interleaved A/B):\n")
		fmt.Fprintf(bw, "%-9s %-6s %6s %9s %9s %9s %9s %9s %9s %9s %7s %7s\n", "transport", "result", "calls",
			"dir p50", "dir p99", "qvr p50", "qvr p99", "add p50", "add p99", "paired", "x p50", "x p99")
		for _, l := range rep.Latency {
			fmt.Fprintf(bw, "%-9s %-6s %6d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7.2f %7.2f\n", l.Transport, l.Result, l.Calls,
				l.DirectP50Ms, l.DirectP99Ms, l.QuiverP50Ms, l.QuiverP99Ms, l.AddedP50Ms, l.AddedP99Ms, l.PairedAddedP50Ms, l.RatioP50, l.RatioP99)
		}
	}
	if len(rep.Browse) > 0 {
		fmt.Fprintf(bw, "\ntool_browse through quiver (top_k 10):\n%-9s %6s %6s %8s %8s\n", "transport", "tools", "calls", "p50 ms", "p99 ms")
		for _, b := range rep.Browse {
			fmt.Fprintf(bw, "%-9s %6d %6d %8.3f %8.3f\n", b.Transport, b.Tools, b.Calls, b.P50Ms, b.P99Ms)
		}
	}
	if len(rep.Throughput) > 0 {
		fmt.Fprintf(bw, "\nThroughput over HTTP, echo (calls/s):\n")
		fmt.Fprintf(bw, "%-20s %-10s %-10s %7s %8s %8s %6s %6s %6s %7s %7s %6s %6s %8s %8s %8s %6s %6s %6s\n", "upstream", "protocol", "up proto", "clients", "direct", "quiver", "ratio",
			"busy d", "busy q", "us/c d", "us/c q", "core d", "core q", "q p50", "q p99", "+p50", "conns", "upconn", "errors")
		for _, t := range rep.Throughput {
			fmt.Fprintf(bw, "%-20s %-10s %-10s %7d %8.0f %8.0f %6.2f %5.0f%% %5.0f%% %7.0f %7.0f %6.2f %6.2f %8.3f %8.3f %8.3f %6d %6d %6d\n", t.Upstream, t.Protocol, orDash(t.UpstreamProtocol), t.Clients,
				t.DirectCallsPerSec, t.QuiverCallsPerSec, t.Ratio, t.DirectCPUPct, t.QuiverCPUPct, t.DirectCPUUsPerCall, t.QuiverCPUUsPerCall,
				t.DirectCores, t.QuiverCores, t.QuiverP50Ms, t.QuiverP99Ms, t.AddedP50Ms, t.ClientConns, t.UpstreamConns, t.Errors)
		}
		fmt.Fprintln(bw, "(up proto: the revision quiver spoke to the upstream, seen by the in-process ones; busy: machine CPU busy; us/c: CPU µs per call of the benchmark process + upstream process; core: cores they used;")
		fmt.Fprintln(bw, " q p50/p99: latency through quiver in ms, +p50: quiver's p50 minus direct's;")
		fmt.Fprintln(bw, " conns: TCP connections clients opened to quiver, upconn: quiver to the in-process upstream)")
	}
	if len(rep.Memory) > 0 {
		fmt.Fprintf(bw, "\nMemory (fresh process per row, runtime ready, after GC):\n%7s %5s %8s %10s %9s %9s %9s\n", "tools", "scale", "RSS MB", "settled MB", "peak MB", "heap MB", "ready ms")
		for _, m := range rep.Memory {
			fmt.Fprintf(bw, "%7d %5d %8.0f %10.0f %9.0f %9.0f %9.0f\n", m.Tools, m.Scale, m.RSSMB, m.SettledRSSMB, m.PeakRSSMB, m.HeapLiveMB, m.ReadyMs)
		}
		fmt.Fprintln(bw, "(settled: after the runtime returned free memory to the OS, as its scavenger does over minutes)")
	}
	if len(rep.Startup) > 0 {
		fmt.Fprintf(bw, "\nStart-up to ready with N stdio upstreams:\n%9s %6s %9s\n", "upstreams", "tools", "ready ms")
		for _, s := range rep.Startup {
			fmt.Fprintf(bw, "%9d %6d %9.0f\n", s.Upstreams, s.Tools, s.ReadyMs)
		}
	}
	if len(rep.Sandbox) > 0 {
		fmt.Fprintf(bw, "\nSandbox: one stdio upstream, start-up to ready and tool_execute echo latency:\n%12s %7s %12s %12s %7s %12s %12s\n",
			"mode", "starts", "start p50 ms", "start max ms", "calls", "call p50 ms", "call p99 ms")
		for _, s := range rep.Sandbox {
			fmt.Fprintf(bw, "%12s %7d %12.1f %12.1f %7d %12.3f %12.3f\n", s.Mode, s.Starts, s.StartP50Ms, s.StartMaxMs, s.Calls, s.P50Ms, s.P99Ms)
		}
	}
	goalLines(bw, rep.Goals)
	m := rep.Machine
	fmt.Fprintf(bw, "\n%d CPUs (%s), load average %s at start, %s, %.1f s\n", m.CPUs, m.CPUModel, m.LoadAvg, m.Go, rep.Seconds)
	return bw.Flush()
}

// orDash is s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
