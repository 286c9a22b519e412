package runtime

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/callstats"
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
	// toolCalls and toolLatency are by server and tool, with label values
	// bounded by labels.
	toolCalls   *prometheus.CounterVec
	toolLatency *prometheus.HistogramVec
	labels      labelBudget
	// recent keeps the last allowed calls per server for the operator
	// console's fleet page.
	recent *callstats.Window
}

// Bounds on the label values of the per-server and per-tool series: a
// fleet of 3,600 tools must not make /metrics a 3,600-series page per
// code. Past them, calls count under otherLabel.
const (
	maxServerLabels = 256
	maxToolLabels   = 1000
	otherLabel      = "_other"
)

// labelBudget hands out label values first come, first served.
type labelBudget struct {
	mu      sync.Mutex
	servers map[string]bool
	tools   map[[2]string]bool
}

// of returns the server and tool labels of a call.
func (b *labelBudget) of(server, tool string) (string, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.servers == nil {
		b.servers, b.tools = map[string]bool{}, map[[2]string]bool{}
	}
	if !b.servers[server] {
		if len(b.servers) >= maxServerLabels {
			return otherLabel, otherLabel
		}
		b.servers[server] = true
	}
	k := [2]string{server, tool}
	if !b.tools[k] {
		if len(b.tools) >= maxToolLabels {
			return server, otherLabel
		}
		b.tools[k] = true
	}
	return server, tool
}

func newMetrics() *metrics {
	m := &metrics{
		recent: callstats.New(0, 0),
		reg:    prometheus.NewRegistry(),
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
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_tool_calls_total",
			Help: "Calls of upstream tools by server, tool and outcome code (ok, tool_error or the error code); at most 256 servers and 1000 tools, the rest as _other."}, []string{"server", "tool", "code"}),
		toolLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quiver_tool_call_seconds",
			Help: "Latency of calls of upstream tools, guards and dispatch included, by server and tool.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"server", "tool"}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.items, m.buildSecs, m.upstream, m.restarts, m.withheldN, m.toolCalls, m.toolLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) call(tool, code string, d time.Duration) {
	m.calls.WithLabelValues(tool, code).Inc()
	m.latency.WithLabelValues(tool).Observe(d.Seconds())
}

// toolCall counts a call that named an upstream tool.
func (m *metrics) toolCall(server, tool, code string, d time.Duration) {
	server, tool = m.labels.of(server, tool)
	m.toolCalls.WithLabelValues(server, tool, code).Inc()
	m.toolLatency.WithLabelValues(server, tool).Observe(d.Seconds())
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

// live sets an upstream's liveness gauge.
func (m *metrics) live(name string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.upstream.WithLabelValues(name).Set(v)
}

// forget drops the series of an upstream no longer configured.
func (m *metrics) forget(name string) {
	m.upstream.DeleteLabelValues(name)
	m.restarts.DeleteLabelValues(name)
}

func (m *metrics) withheld(n int) { m.withheldN.Set(float64(n)) }

// sessionsOpen publishes the number of MCP sessions the HTTP listener
// holds, as open reports it.
func (m *metrics) sessionsOpen(open func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quiver_http_sessions_open",
		Help: "MCP sessions (protocol 2025-11-25 and older) the HTTP listener holds."}, func() float64 { return float64(open()) }))
}
