package runtime

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/quiver-mcp/quiver/toolid"
)

// metrics are one runtime's Prometheus collectors, in a registry of its own
// (no global registry: two runtimes in one process stay apart).
type metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	items     *prometheus.GaugeVec
	buildSecs prometheus.Gauge
	upstream  *prometheus.GaugeVec
	restarts  *prometheus.CounterVec
	// withheldN counts what direct exposure withholds for name collisions.
	withheldN prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_meta_calls_total",
			Help: "Meta-tool calls by tool and outcome code."}, []string{"tool", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quiver_meta_call_seconds",
			Help: "Meta-tool call latency.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"tool"}),
		items: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quiver_catalog_items",
			Help: "Items in the served catalog by kind."}, []string{"kind"}),
		buildSecs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "quiver_catalog_build_seconds",
			Help: "Duration of the last catalog build."}),
		upstream: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quiver_upstream_up",
			Help: "1 when the upstream has a live session."}, []string{"upstream"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_upstream_connects_total",
			Help: "Successful upstream (re)connects."}, []string{"upstream"}),
		withheldN: prometheus.NewGauge(prometheus.GaugeOpts{Name: "quiver_direct_withheld",
			Help: "Tools, prompts, resources and templates not listed directly because their name was taken."}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.items, m.buildSecs, m.upstream, m.restarts, m.withheldN,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) call(tool, code string, d time.Duration) {
	m.calls.WithLabelValues(tool, code).Inc()
	m.latency.WithLabelValues(tool).Observe(d.Seconds())
}

func (m *metrics) catalogBuilt(s *catalog.Snapshot, d time.Duration) {
	for _, k := range []toolid.Kind{toolid.KindTool, toolid.KindResource, toolid.KindPrompt} {
		m.items.WithLabelValues(string(k)).Set(float64(len(s.Items(k))))
	}
	m.buildSecs.Set(d.Seconds())
}

func (m *metrics) upstreamState(st upstream.State) {
	up := 0.0
	if st.Status == upstream.StatusReady {
		up = 1
		m.restarts.WithLabelValues(st.Name).Inc()
	}
	m.upstream.WithLabelValues(st.Name).Set(up)
}

func (m *metrics) withheld(n int) { m.withheldN.Set(float64(n)) }
