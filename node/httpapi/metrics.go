package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are one Server's Prometheus collectors. Collectors are safe for
// concurrent use.
type metrics struct {
	requests        *prometheus.CounterVec   // api, endpoint, status
	latency         *prometheus.HistogramVec // api, endpoint
	ttft            *prometheus.HistogramVec // api
	promptTokens    *prometheus.CounterVec   // api
	cachedTokens    *prometheus.CounterVec   // api
	generatedTokens *prometheus.CounterVec   // api
	inflight        prometheus.Gauge
	handler         http.Handler
}

func newMetrics(reg *prometheus.Registry, gen Generator) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Name: "http_requests_total",
			Help: "HTTP requests by API, endpoint and status (499: the client disconnected; a streamed reply that failed counts with its error's status).",
		}, []string{"api", "endpoint", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "meshllm", Name: "http_request_duration_seconds",
			Help:    "End-to-end request latency, from the request's arrival to the last byte of the reply.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 17), // 5 ms .. 5.5 min
		}, []string{"api", "endpoint"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "meshllm", Name: "time_to_first_token_seconds",
			Help:    "Time from a generation request's arrival to its first generated token.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 15), // 5 ms .. 82 s
		}, []string{"api"}),
		promptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Name: "prompt_tokens_total",
			Help: "Prompt tokens of served requests, cached ones included.",
		}, []string{"api"}),
		cachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Name: "cached_prompt_tokens_total",
			Help: "Prompt tokens reused from the KV cache instead of being prefilled.",
		}, []string{"api"}),
		generatedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Name: "generated_tokens_total",
			Help: "Tokens generated for served requests.",
		}, []string{"api"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "meshllm", Name: "http_requests_in_flight",
			Help: "HTTP requests being served now.",
		}),
	}
	for _, c := range []prometheus.Collector{
		m.requests, m.latency, m.ttft, m.promptTokens, m.cachedTokens, m.generatedTokens, m.inflight,
		newEngineCollector(gen),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m, nil
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.metrics.handler.ServeHTTP(w, r)
}

// engineCollector exports the Generator's Stats as gauges, read once per
// scrape.
type engineCollector struct {
	gen   Generator
	descs []*prometheus.Desc
}

func newEngineCollector(gen Generator) *engineCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("meshllm_engine_"+name, help, nil, nil)
	}
	return &engineCollector{gen: gen, descs: []*prometheus.Desc{
		d("slots", "KV slots (parallel sequences)."),
		d("active_requests", "Requests holding a slot now."),
		d("queued_requests", "Requests waiting for a slot (queue depth)."),
		d("queue_limit", "Queue depth beyond which requests are refused as busy."),
		d("cache_cells", "KV cells holding cached tokens."),
		d("cache_cells_limit", "KV cells in all."),
		d("cached_sequences", "Distinct cached sequences."),
		d("served_requests_total", "Requests the engine finished since it started."),
	}}
}

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.gen.Stats()
	vals := []int{st.Slots, st.Active, st.Queued, st.QueueLimit, st.CacheCells, st.CacheLimit, st.CachedSeqs, st.ServedTotal}
	for i, d := range c.descs {
		kind := prometheus.GaugeValue
		if i == len(c.descs)-1 {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(d, kind, float64(vals[i]))
	}
}
