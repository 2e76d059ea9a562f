package service

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sluicehq/sluice/internal/config"
)

// Decision label values of sluice_decisions_total.
const (
	DecisionAllowed      = "allowed"
	DecisionDenied       = "denied"
	DecisionShadowDenied = "shadow_denied"
)

// metrics are the Service's Prometheus metrics. Labels name policies, never
// keys: a key is user input, and a label per key would let any client grow the
// metrics without bound.
type metrics struct {
	registry    *prometheus.Registry
	decisions   *prometheus.CounterVec
	duration    prometheus.Histogram
	storeErrors *prometheus.CounterVec
	storeCalls  prometheus.Histogram
	reloads     *prometheus.CounterVec
	degraded    *prometheus.CounterVec
}

type decisionCounters struct {
	allowed, denied, shadowDenied prometheus.Counter
}

func newMetrics(version string) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_decisions_total",
			Help: "Decisions per policy: allowed, denied (the request was refused), or shadow_denied (a shadow policy would have refused it).",
		}, []string{"policy", "decision"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_decision_duration_seconds",
			Help:    "Time to decide one request, store round trip included.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_errors_total",
			Help: "Store calls that failed, by cause: timeout (no answer within the timeout), connection (Redis unreachable or the connection lost), error (Redis answered with an error, e.g. OOM at maxmemory).",
		}, []string{"cause"}),
		storeCalls: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_store_call_duration_seconds",
			Help:    "Time each call to Redis took, answered or failed (not the calls the circuit breaker kept away).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Configuration reloads by result: success, or failure (the old configuration stays in force).",
		}, []string{"result"}),
	}
	m.degraded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_store_degraded_decisions_total",
		Help: "Requests decided by the fail policy (store.on_error) because the store could not decide them: open admitted them uncounted, closed denied them, local decided them on the in-process store.",
	}, []string{"on_error"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_build_info",
		Help: "Always 1; the labels say which build is running.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	for _, c := range storeCauses {
		m.storeErrors.WithLabelValues(c)
	}
	m.registry.MustRegister(m.decisions, m.duration, m.storeErrors, m.reloads, m.degraded, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// forPolicy returns the policy's counters; a snapshot keeps them, so that
// the hot path does one label lookup per policy and configuration.
func (m *metrics) forPolicy(name string) *decisionCounters {
	return &decisionCounters{
		allowed:      m.decisions.WithLabelValues(name, DecisionAllowed),
		denied:       m.decisions.WithLabelValues(name, DecisionDenied),
		shadowDenied: m.decisions.WithLabelValues(name, DecisionShadowDenied),
	}
}

// count records one check's decision. Every check of a denied request counts
// as denied, except shadow checks, which were only peeked at and count
// nothing; a shadow check of an allowed request counts as shadow_denied when
// its own decision was a denial.
func (snap *snapshot) count(p *config.Policy, m *metrics, requestAllowed, checkAllowed bool) {
	var c *decisionCounters
	switch v, ok := snap.counters.Load(p); {
	case ok:
		c = v.(*decisionCounters)
	case snap.cfg.Policies[p.Name] == p:
		v, _ = snap.counters.LoadOrStore(p, m.forPolicy(p.Name))
		c = v.(*decisionCounters)
	default: // a policy built outside the configuration (per request, tests): not kept
		c = m.forPolicy(p.Name)
	}
	switch {
	case p.Shadow && !requestAllowed:
	case p.Shadow && !checkAllowed:
		c.shadowDenied.Inc()
	case requestAllowed:
		c.allowed.Inc()
	default:
		c.denied.Inc()
	}
}
