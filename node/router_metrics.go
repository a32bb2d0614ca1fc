package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// routerMetrics are one Router's Prometheus collectors, registered on the
// registry its config names (none when nil). Collectors are safe for
// concurrent use.
type routerMetrics struct {
	decisions     *prometheus.CounterVec // reason
	served        *prometheus.CounterVec // where: local, peer, continued
	fallbacks     *prometheus.CounterVec // cause, stage
	pushBackSkips prometheus.Counter
	forwardedIn   *prometheus.CounterVec // outcome
	estimated     *prometheus.CounterVec // where
	realized      *prometheus.CounterVec // where
	estimateError *prometheus.HistogramVec
	decideSeconds prometheus.Histogram
}

func newRouterMetrics(reg *prometheus.Registry, mesh *Mesh) (*routerMetrics, error) {
	m := &routerMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "decisions_total",
			Help: "Routing decisions by reason: served-local, forwarded, refused-rtt (a peer held more of the prompt but the link cost exceeded the saving), no-peers, push-back, forward-policy (the forward policy excluded every peer).",
		}, []string{"reason"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "served_total",
			Help: "Requests finished, by where: local, peer (a forward succeeded), continued (a peer failed mid-stream and the local engine finished the reply).",
		}, []string{"where"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "fallbacks_total",
			Help: "Forwards that failed and fell back to the next candidate or local, by cause (busy, timeout, error, rejected) and stage (before-first-piece, mid-stream).",
		}, []string{"cause", "stage"}),
		pushBackSkips: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "push_back_skips_total",
			Help: "Peers skipped by decisions because they advertised push-back or were cooling down.",
		}),
		forwardedIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "forwarded_in_total",
			Help: "Requests other peers forwarded here, by outcome: served, busy (refused above the queue threshold), error.",
		}, []string{"outcome"}),
		estimated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "estimated_cached_tokens_total",
			Help: "Cached prompt tokens the decision expected the serving engine to reuse, by where (local: exact; peer: digest estimate).",
		}, []string{"where"}),
		realized: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "realized_cached_tokens_total",
			Help: "Cached prompt tokens the serving engine reported reusing, by where; realized/estimated is the routing precision.",
		}, []string{"where"}),
		estimateError: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "cache_estimate_error_tokens",
			Help:    "Realized minus estimated cached tokens per served request (negative: the estimate was optimistic), by where.",
			Buckets: []float64{-1024, -256, -64, -16, -1, 0, 15, 64, 256, 1024},
		}, []string{"where"}),
		decideSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "meshllm", Subsystem: "router", Name: "decision_seconds",
			Help:    "Time to build the view and decide (local match, digest walk over all replicas, scoring).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10), // 1 us .. 0.26 s
		}),
	}
	if reg == nil {
		return m, nil
	}
	peers := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "meshllm", Subsystem: "mesh", Name: "peers_known",
		Help: "Peers serving this model that the mesh view holds.",
	}, func() float64 { return float64(mesh.Len()) })
	for _, c := range []prometheus.Collector{m.decisions, m.served, m.fallbacks, m.pushBackSkips,
		m.forwardedIn, m.estimated, m.realized, m.estimateError, m.decideSeconds, peers} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// cached records an estimate against its realization.
func (m *routerMetrics) cached(where string, est, real int) {
	m.estimated.WithLabelValues(where).Add(float64(est))
	m.realized.WithLabelValues(where).Add(float64(real))
	m.estimateError.WithLabelValues(where).Observe(float64(real - est))
}
