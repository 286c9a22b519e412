package benchmarks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ReadRouteResults reads the output of `quiver bench route --json` (one
// object per query source) back into results: source, role, qids,
// recall@k, clone_recall@k and mrr. Timing figures are not read back.
func ReadRouteResults(r io.Reader) ([]RouteResult, error) {
	var out []RouteResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("route results line %d: %w", line, err)
		}
		res := RouteResult{Recall: map[int]float64{}}
		res.Source, _ = m["source"].(string)
		res.Role, _ = m["role"].(string)
		if v, ok := m["qids"].(float64); ok {
			res.QIDs = int(v)
		}
		res.MRR, _ = m["mrr"].(float64)
		for key, v := range m {
			f, ok := v.(float64)
			if !ok {
				continue
			}
			if ks, ok := strings.CutPrefix(key, "recall@"); ok {
				if k, err := strconv.Atoi(ks); err == nil {
					res.Recall[k] = f
					res.Ks = append(res.Ks, k)
				}
			}
			if ks, ok := strings.CutPrefix(key, "clone_recall@"); ok {
				if k, err := strconv.Atoi(ks); err == nil {
					if res.CloneRecall == nil {
						res.CloneRecall = map[int]float64{}
					}
					res.CloneRecall[k] = f
				}
			}
		}
		if res.Source == "" || len(res.Ks) == 0 {
			return nil, fmt.Errorf("route results line %d: want source and recall@k", line)
		}
		slices.Sort(res.Ks)
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("route results: %w", err)
	}
	return out, nil
}

// WriteRouteDiff writes recall@k and MRR of before and after side by side,
// per source present in both, with the change.
func WriteRouteDiff(w io.Writer, before, after []RouteResult) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-14s %-6s %-7s %7s %7s %7s\n", "source", "role", "figure", "before", "after", "change")
	for _, a := range after {
		i := slices.IndexFunc(before, func(b RouteResult) bool { return b.Source == a.Source })
		if i < 0 {
			continue
		}
		b := before[i]
		role := a.Role
		if role == "" {
			role = "-"
		}
		for _, k := range a.Ks {
			bv, ok := b.Recall[k]
			if !ok {
				continue
			}
			fmt.Fprintf(bw, "%-14s %-6s %-7s %7.3f %7.3f %+7.3f\n", a.Source, role, "R@"+strconv.Itoa(k), bv, a.Recall[k], change(bv, a.Recall[k]))
		}
		fmt.Fprintf(bw, "%-14s %-6s %-7s %7.3f %7.3f %+7.3f\n", a.Source, role, "MRR", b.MRR, a.MRR, change(b.MRR, a.MRR))
	}
	return bw.Flush()
}

// change is after - before at the 4 digits of the JSON output, without a
// negative zero.
func change(before, after float64) float64 {
	d := round(after, 4) - round(before, 4)
	if math.Abs(d) < 1e-9 {
		return 0
	}
	return d
}

// WriteRecallSVG plots recall@k against k, before (dashed) and after
// (solid), one panel per query source of after.
func WriteRecallSVG(w io.Writer, before, after []RouteResult) error {
	const pw, ph = 400.0, 300.0
	var panels []panel
	curve := func(r RouteResult, name, color string, dash bool) series {
		s := series{name: name, color: color, markers: true, dash: dash}
		for _, k := range r.Ks {
			s.xs = append(s.xs, float64(k))
			s.ys = append(s.ys, r.Recall[k])
		}
		return s
	}
	for i, a := range after {
		title := a.Source
		if a.Role != "" {
			title += " (" + a.Role + ")"
		}
		p := panel{title: fmt.Sprintf("%s, %d qids", title, a.QIDs), xlabel: "k (cards shown)", ylabel: "recall@k",
			yMin: 0, yMax: 1, legendLow: true, x: float64(i) * pw, w: pw, h: ph}
		if j := slices.IndexFunc(before, func(b RouteResult) bool { return b.Source == a.Source }); j >= 0 {
			p.series = append(p.series, curve(before[j], fmt.Sprintf("before: R@5 %.3f", before[j].Recall[5]), "#7f7f7f", true))
		}
		p.series = append(p.series, curve(a, fmt.Sprintf("after: R@5 %.3f", a.Recall[5]), "#1f77b4", false))
		panels = append(panels, p)
	}
	return writeSVG(w, pw*float64(max(len(panels), 1)), ph, panels)
}
