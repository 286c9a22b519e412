package benchmarks

import (
	"math/rand/v2"

	"github.com/quiver-mcp/quiver/catalog"
)

// SampleByServer returns n tools of src taken whole server by whole server:
// the servers (in first-seen order) are shuffled with a generator seeded by
// seed, and their tools are taken in that order until n are taken; the last
// server taken may contribute only its first tools, so that the sample holds
// exactly min(n, len(src.Tools)) tools. Every server but that last one is
// either absent or complete. Samples of one seed are nested: the sample of n
// is a prefix of the sample of any larger n. Within the sample, tools keep
// their order in src. Resources and prompts are not sampled (the result
// has none).
func SampleByServer(src catalog.Source, n int, seed uint64) catalog.Source {
	if n >= len(src.Tools) {
		return catalog.Source{Tools: append([]catalog.ToolDef(nil), src.Tools...)}
	}
	if n <= 0 {
		return catalog.Source{}
	}
	var servers []string
	byServer := map[string][]int{}
	for i, t := range src.Tools {
		if _, ok := byServer[t.Server]; !ok {
			servers = append(servers, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], i)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rng.Shuffle(len(servers), func(i, j int) { servers[i], servers[j] = servers[j], servers[i] })
	keep := make([]bool, len(src.Tools))
	taken := 0
	for _, s := range servers {
		for _, i := range byServer[s] {
			if taken == n {
				break
			}
			keep[i] = true
			taken++
		}
		if taken == n {
			break
		}
	}
	out := catalog.Source{Tools: make([]catalog.ToolDef, 0, n)}
	for i, t := range src.Tools {
		if keep[i] {
			out.Tools = append(out.Tools, t)
		}
	}
	return out
}
