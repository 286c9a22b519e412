// Package benchmarks measures quiver against real catalogs and labelled
// queries: routing recall and latency (RunRoute), context tokens of the
// gateway, proxy and baseline surfaces and the firewall's savings
// (RunTokens), and latency, throughput, memory and start-up direct vs
// through quiver (RunOverhead, RunMemory, RunStartup), with results
// committed under benchmarks/results.
package benchmarks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/quiver-mcp/quiver/router"
)

// Gold is one correct tool of a labelled query: the tool name on Server or
// on any of AltServers (the same tool offered by several servers).
type Gold struct {
	Server     string
	Tool       string
	AltServers []string
}

// Matches reports whether a routed tool (upstream name on server) is this
// gold tool.
func (g Gold) Matches(server, name string) bool {
	if name != g.Tool {
		return false
	}
	if server == g.Server {
		return true
	}
	for _, s := range g.AltServers {
		if server == s {
			return true
		}
	}
	return false
}

// Query is one labelled query with its set of gold tools.
type Query struct {
	Source string
	QID    string
	Text   string
	Golds  []Gold
}

// queryLine is one line of queries.jsonl: one (query, gold tool) pair.
type queryLine struct {
	Source     string   `json:"source"`
	QID        string   `json:"qid"`
	Query      string   `json:"query"`
	Server     *string  `json:"server"`
	Tool       string   `json:"tool"`
	AltServers []string `json:"alt_servers"`
	Unresolved bool     `json:"unresolved"`
}

// LoadQueries reads a labelled query file (JSON Lines of (query, gold tool)
// pairs, see shared/data/README.md) and groups it by qid in file order.
// Unresolved golds (tools absent from the catalog) are skipped, and so is a
// qid left without golds; duplicate golds of a qid count once.
func LoadQueries(path string) ([]Query, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read queries: %w", err)
	}
	var out []Query
	at := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var ql queryLine
		if err := json.Unmarshal(b, &ql); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if ql.QID == "" || ql.Query == "" {
			return nil, fmt.Errorf("%s:%d: a query line needs qid and query", path, line)
		}
		if ql.Unresolved || ql.Server == nil || ql.Tool == "" {
			continue
		}
		i, ok := at[ql.QID]
		if !ok {
			i = len(out)
			at[ql.QID] = i
			out = append(out, Query{Source: ql.Source, QID: ql.QID, Text: ql.Query})
		}
		g := Gold{Server: *ql.Server, Tool: ql.Tool, AltServers: ql.AltServers}
		dup := false
		for _, h := range out[i].Golds {
			if h.Server == g.Server && h.Tool == g.Tool {
				dup = true
				break
			}
		}
		if !dup {
			out[i].Golds = append(out[i].Golds, g)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", path, line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no resolved queries", path)
	}
	return out, nil
}

// Sources returns the distinct query sources in first-seen order.
func Sources(qs []Query) []string {
	var out []string
	seen := map[string]bool{}
	for _, q := range qs {
		if !seen[q.Source] {
			seen[q.Source] = true
			out = append(out, q.Source)
		}
	}
	return out
}

// Scores are the quality figures of one query set.
type Scores struct {
	QIDs int
	// Recall maps k to the mean over qids of the share of the qid's gold
	// tools found in the top k.
	Recall map[int]float64
	// MRR is the mean reciprocal rank of the first gold tool (0 when none is
	// in the returned hits).
	MRR float64
}

// Score computes recall@k for every k in ks and MRR from ranked hits, where
// ranked[i] holds the hits returned for qs[i] (at least max(ks) of them when
// available).
func Score(qs []Query, ranked [][]router.Hit, ks []int) Scores {
	s := Scores{QIDs: len(qs), Recall: make(map[int]float64, len(ks))}
	if len(qs) == 0 {
		return s
	}
	ks = append([]int(nil), ks...)
	sort.Ints(ks)
	for i, q := range qs {
		hits := ranked[i]
		rank := make([]int, len(q.Golds)) // 1-based rank of each gold, 0 = absent
		for j, g := range q.Golds {
			for r, h := range hits {
				if h.Item != nil && g.Matches(h.Item.Server, h.Item.UpstreamName) {
					rank[j] = r + 1
					break
				}
			}
		}
		first := 0
		for _, r := range rank {
			if r > 0 && (first == 0 || r < first) {
				first = r
			}
		}
		if first > 0 {
			s.MRR += 1 / float64(first)
		}
		for _, k := range ks {
			n := 0
			for _, r := range rank {
				if r > 0 && r <= k {
					n++
				}
			}
			s.Recall[k] += float64(n) / float64(len(q.Golds))
		}
	}
	for _, k := range ks {
		s.Recall[k] /= float64(len(qs))
	}
	s.MRR /= float64(len(qs))
	return s
}
