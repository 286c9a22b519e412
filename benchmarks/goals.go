package benchmarks

import "fmt"

// Goal is one target of the benchmark issue and whether a run met it.
type Goal struct {
	// Name says what is measured, Target the goal, Measured the
	// run's figure in words.
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	// Met is nil when the run did not measure the goal.
	Met *bool `json:"met"`
}

func goal(name, target string, measured string, met *bool) Goal {
	if met == nil {
		measured = "not measured"
	}
	return Goal{Name: name, Target: target, Measured: measured, Met: met}
}

func ptr(b bool) *bool { return &b }

// TokensGoals evaluates the token goal on the largest catalog size: the
// gateway path (meta-tools + one browse of top_k 5 + one hydrate) under
// 0.5% of the baseline tokens.
func TokensGoals(rep *TokensReport) []Goal {
	var met *bool
	measured := ""
	if n := len(rep.Sizes); n > 0 {
		last := rep.Sizes[n-1]
		for _, g := range last.Gateway {
			if g.TopK == 5 {
				met = ptr(g.PctOfBaseline < 0.5)
				measured = fmt.Sprintf("%.3f%% (%.0f of %d tokens, %d tools)", g.PctOfBaseline, g.GatewayTokens, last.BaselineTokens, last.Tools)
			}
		}
	}
	return []Goal{goal("gateway tokens at the largest size", "< 0.5% of baseline (top_k 5)", measured, met)}
}

// OverheadGoals evaluates the latency, throughput and memory goals.
func OverheadGoals(rep *OverheadReport) []Goal {
	var out []Goal
	var met *bool
	measured := ""
	for _, l := range rep.Latency {
		if l.Transport == "http" && l.Result == "small" {
			met = ptr(l.AddedP50Ms < 0.3)
			measured = fmt.Sprintf("%.3f ms (paired %.3f ms)", l.AddedP50Ms, l.PairedAddedP50Ms)
		}
	}
	out = append(out, goal("added p50 latency, small result, HTTP", "< 0.3 ms", measured, met))
	met, measured = nil, ""
	best := 0
	for _, t := range rep.Throughput {
		// The first protocol measured (2026-07-28 by default) counts.
		if t.Upstream == "in-process" && t.Clients > best {
			best = t.Clients
			met = ptr(t.QuiverCallsPerSec >= 5000)
			measured = fmt.Sprintf("%.0f calls/s with %d clients (direct %.0f)", t.QuiverCallsPerSec, t.Clients, t.DirectCallsPerSec)
			if t.Protocol != "" {
				measured += " at " + t.Protocol
			}
		}
	}
	out = append(out, goal("tool_execute throughput, HTTP, in-process upstream", ">= 5,000 calls/s with 64 clients", measured, met))
	met, measured = nil, ""
	for _, m := range rep.Memory {
		if m.Tools >= 30000 {
			met = ptr(m.RSSMB < 300)
			measured = fmt.Sprintf("%.0f MB RSS with %d tools (settled %.0f MB, peak %.0f MB, live heap %.0f MB)", m.RSSMB, m.Tools, m.SettledRSSMB, m.PeakRSSMB, m.HeapLiveMB)
		}
	}
	out = append(out, goal("memory with 36k tools", "< 300 MB RSS", measured, met))
	return out
}
