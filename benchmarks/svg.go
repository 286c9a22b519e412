package benchmarks

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Hand-written SVG plots: no plotting dependency, deterministic output.

type series struct {
	name, color string
	xs, ys      []float64
	markers     bool
	dash        bool
}

type panel struct {
	title, xlabel, ylabel string
	logX, logY            bool
	x, y, w, h            float64 // outer box in px
	series                []series
	// fixed y range for linear axes (0..1 for CDFs); zero means auto.
	yMin, yMax float64
	// legendLow puts the legend in the lower right corner.
	legendLow bool
}

const (
	padL, padR, padT, padB = 64.0, 16.0, 28.0, 44.0
)

func (p panel) bounds() (x0, x1, y0, y1 float64) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	for _, s := range p.series {
		for i := range s.xs {
			x0, x1 = math.Min(x0, s.xs[i]), math.Max(x1, s.xs[i])
			y0, y1 = math.Min(y0, s.ys[i]), math.Max(y1, s.ys[i])
		}
	}
	if p.yMax > p.yMin {
		y0, y1 = p.yMin, p.yMax
	}
	if p.logX {
		x0, x1 = math.Pow(10, math.Floor(math.Log10(x0))), math.Pow(10, math.Ceil(math.Log10(x1)))
	}
	if p.logY {
		y0, y1 = math.Pow(10, math.Floor(math.Log10(y0))), math.Pow(10, math.Ceil(math.Log10(y1)))
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	return
}

// ticks returns tick values for an axis.
func ticks(lo, hi float64, log bool) []float64 {
	var out []float64
	if log {
		for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)); d++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, d)
				if v >= lo*0.999 && v <= hi*1.001 {
					out = append(out, v)
				}
			}
		}
		return out
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= 6 {
			step *= m
			break
		}
	}
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9; i++ {
		out = append(out, math.Round(i*step*1e9)/1e9)
	}
	return out
}

func fmtTick(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (p panel) render(b *strings.Builder) {
	x0, x1, y0, y1 := p.bounds()
	pw, ph := p.w-padL-padR, p.h-padT-padB
	ox, oy := p.x+padL, p.y+padT
	sx := func(v float64) float64 {
		if p.logX {
			return ox + pw*(math.Log10(v)-math.Log10(x0))/(math.Log10(x1)-math.Log10(x0))
		}
		return ox + pw*(v-x0)/(x1-x0)
	}
	sy := func(v float64) float64 {
		if p.logY {
			return oy + ph - ph*(math.Log10(v)-math.Log10(y0))/(math.Log10(y1)-math.Log10(y0))
		}
		return oy + ph - ph*(v-y0)/(y1-y0)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13" font-weight="bold">%s</text>`+"\n", ox, p.y+18, html.EscapeString(p.title))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", ox, oy, pw, ph)
	for _, t := range ticks(x0, x1, p.logX) {
		x := sx(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x, oy, x, oy+ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text>`+"\n", x, oy+ph+14, fmtTick(t))
	}
	for _, t := range ticks(y0, y1, p.logY) {
		y := sy(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", ox, y, ox+pw, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">%s</text>`+"\n", ox-4, y+3, fmtTick(t))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", ox+pw/2, oy+ph+32, html.EscapeString(p.xlabel))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		p.x+14, oy+ph/2, p.x+14, oy+ph/2, html.EscapeString(p.ylabel))
	for i, s := range p.series {
		var pts []string
		for j := range s.xs {
			if (p.logX && s.xs[j] <= 0) || (p.logY && s.ys[j] <= 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(s.xs[j]), sy(s.ys[j])))
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		if s.markers {
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
			}
		}
		lx, ly := ox+10, oy+14+float64(i)*15
		if p.legendLow {
			lx, ly = ox+pw*0.42, oy+ph-10-float64(len(p.series)-1-i)*15
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly-4, lx+20, ly-4, s.color, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", lx+25, ly, html.EscapeString(s.name))
	}
}

func writeSVG(w io.Writer, width, height float64, panels []panel) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for _, p := range panels {
		p.render(&b)
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	return nil
}

// WriteSavingsSVG plots the token cost of the baseline, proxy and gateway
// surfaces against catalog size (log-log).
func WriteSavingsSVG(w io.Writer, rep *TokensReport) error {
	p := panel{title: "Context tokens vs catalog size (cl100k_base)", xlabel: "tools in the catalog", ylabel: "tokens",
		logX: true, logY: true, w: 720, h: 440}
	base := series{name: "baseline: full tools/list", color: "#d62728", markers: true}
	proxy := series{name: "proxy: stripped tools/list + meta-tools", color: "#ff7f0e", markers: true}
	gws := map[int]*series{}
	var ks []int
	colors := []string{"#1f77b4", "#2ca02c", "#9467bd"}
	for _, s := range rep.Sizes {
		x := float64(s.Tools)
		base.xs, base.ys = append(base.xs, x), append(base.ys, float64(s.BaselineTokens))
		proxy.xs, proxy.ys = append(proxy.xs, x), append(proxy.ys, float64(s.ProxyTokens))
		for _, g := range s.Gateway {
			gs, ok := gws[g.TopK]
			if !ok {
				gs = &series{name: fmt.Sprintf("gateway: meta-tools + browse(top_k %d) + hydrate", g.TopK),
					color: colors[len(ks)%len(colors)], markers: true}
				gws[g.TopK] = gs
				ks = append(ks, g.TopK)
			}
			gs.xs, gs.ys = append(gs.xs, x), append(gs.ys, g.GatewayTokens)
		}
	}
	p.series = []series{base, proxy}
	slices.Sort(ks)
	for _, k := range ks {
		p.series = append(p.series, *gws[k])
	}
	return writeSVG(w, p.w, p.h, []panel{p})
}

// WriteLatencySVG plots the latency distributions (CDFs) of the direct and
// quiver paths, one panel per transport and result size.
func WriteLatencySVG(w io.Writer, rep *OverheadReport) error {
	const pw, ph = 440.0, 300.0
	var panels []panel
	for i, l := range rep.Latency {
		if len(l.Direct) == 0 {
			continue
		}
		p := panel{title: fmt.Sprintf("%s, %s result (%d calls each)", l.Transport, l.Result, l.Calls),
			xlabel: "latency, ms (log)", ylabel: "share of calls", logX: true, yMin: 0, yMax: 1, legendLow: true,
			x: float64(i%2) * pw, y: float64(i/2) * ph, w: pw, h: ph}
		p.series = []series{
			cdf(fmt.Sprintf("direct p50 %.3f p99 %.2f ms", l.DirectP50Ms, l.DirectP99Ms), "#7f7f7f", l.Direct),
			cdf(fmt.Sprintf("quiver p50 %.3f p99 %.2f ms", l.QuiverP50Ms, l.QuiverP99Ms), "#1f77b4", l.Quiver),
		}
		panels = append(panels, p)
	}
	rows := (len(panels) + 1) / 2
	return writeSVG(w, 2*pw, float64(max(rows, 1))*ph, panels)
}

// cdf returns the empirical distribution of ds up to its 99.5th
// percentile, at most 200 points.
func cdf(name, color string, ds []time.Duration) series {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	top := max(int(float64(n)*0.995), 1)
	step := max(top/200, 1)
	out := series{name: name, color: color}
	for i := 0; i < top; i += step {
		out.xs = append(out.xs, math.Max(ms(s[i]), 0.001))
		out.ys = append(out.ys, float64(i+1)/float64(n))
	}
	return out
}
