// Package observe is where a Sluice server's decisions and store calls are
// observed: the Prometheus registry and every metric the server exports
// (decisions per policy, their duration, store errors and calls, reloads,
// decisions by the fail policy, the store stack's layers), the log lines
// about failed store calls, and the decisions' notes on their spans. The
// engine reports each decision to one Observer, and nothing else counts
// decisions.
package observe

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/tracing"
)

// Decision label values of sluice_decisions_total.
const (
	DecisionAllowed      = "allowed"
	DecisionDenied       = "denied"
	DecisionShadowDenied = "shadow_denied"
)

// Observer holds a server's metrics, logger and tracer. Labels name
// policies, never keys: a key is user input, and a label per key would let
// any client grow the metrics without bound. It is safe for concurrent use.
type Observer struct {
	registry    *prometheus.Registry
	decisions   *prometheus.CounterVec
	duration    prometheus.Histogram
	storeErrors *prometheus.CounterVec
	storeCalls  prometheus.Histogram
	reloads     *prometheus.CounterVec
	degraded    *prometheus.CounterVec
	releases    *prometheus.CounterVec

	log    *slog.Logger
	tracer *tracing.Tracer // nil: off
	errLog errorLog
	// current holds the configuration in force with its policies' counters.
	current atomic.Pointer[snapshot]
}

// snapshot is one configuration with its policies' decision counters.
type snapshot struct {
	cfg *config.Config
	// counters holds each policy's decision counters (*config.Policy →
	// *decisionCounters), resolved at its first decision: a configuration of
	// many policies costs nothing to install and adds no series to /metrics
	// for policies that decide nothing.
	counters sync.Map
}

type decisionCounters struct {
	allowed, denied, shadowDenied prometheus.Counter
}

// New returns an Observer whose sluice_build_info says version, logging on
// log and tracing on tracer (nil: off).
func New(version string, log *slog.Logger, tracer *tracing.Tracer) *Observer {
	o := &Observer{
		registry: prometheus.NewRegistry(),
		log:      log,
		tracer:   tracer,
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
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_degraded_decisions_total",
			Help: "Requests decided by the fail policy (store.on_error) because the store could not decide them: open admitted them uncounted, closed denied them, local decided them on the in-process store.",
		}, []string{"on_error"}),
		releases: newReleases(),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_build_info",
		Help: "Always 1; the labels say which build is running.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	o.reloads.WithLabelValues("success")
	o.reloads.WithLabelValues("failure")
	for _, c := range storeCauses {
		o.storeErrors.WithLabelValues(c)
	}
	o.registry.MustRegister(o.decisions, o.duration, o.storeErrors, o.reloads, o.degraded, o.releases, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.current.Store(&snapshot{})
	return o
}

// Registry returns the registry of the server's metrics.
func (o *Observer) Registry() *prometheus.Registry { return o.registry }

// Logger returns the server's logger.
func (o *Observer) Logger() *slog.Logger { return o.log }

// Tracer returns the server's tracer: nil when tracing is off.
func (o *Observer) Tracer() *tracing.Tracer { return o.tracer }

// WatchStack exports the store stack's state: the fail policy's breaker,
// timeout and calls (each failed call counted and logged), and what the
// lease and memory layers hold; config is the configuration in force, whose
// policies the lease bounds are reported for.
func (o *Observer) WatchStack(st *storestack.Stack, config func() *config.Config) {
	if st.Failover != nil {
		o.watchFailover(st.Failover)
	}
	o.registry.MustRegister(newStoreCollector(st, config))
}

// Install makes cfg the configuration decisions are counted under.
func (o *Observer) Install(cfg *config.Config) { o.current.Store(&snapshot{cfg: cfg}) }

// Reloaded counts a configuration reload, failed or not.
func (o *Observer) Reloaded(ok bool) {
	if ok {
		o.reloads.WithLabelValues("success").Inc()
	} else {
		o.reloads.WithLabelValues("failure").Inc()
	}
}

// Took records how long a decision took.
func (o *Observer) Took(d time.Duration) { o.duration.Observe(d.Seconds()) }

// Degraded counts a request the fail policy mode decided.
func (o *Observer) Degraded(mode string) { o.degraded.WithLabelValues(mode).Inc() }

// Decision counts one check of a decision under its configured policy p.
// Every check of a denied request counts as denied, except shadow checks,
// which were only peeked at and count nothing; a shadow check of an allowed
// request counts as shadow_denied when it would have denied.
func (o *Observer) Decision(p *config.Policy, requestAllowed, checkAllowed bool) {
	switch {
	case p.Shadow && !requestAllowed:
	case p.Shadow && !checkAllowed:
		o.counters(p).shadowDenied.Inc()
	case requestAllowed:
		o.counters(p).allowed.Inc()
	default:
		o.counters(p).denied.Inc()
	}
}

// counters returns p's counters; the snapshot keeps them, so that the hot
// path does one label lookup per policy and configuration.
func (o *Observer) counters(p *config.Policy) *decisionCounters {
	snap := o.current.Load()
	if v, ok := snap.counters.Load(p); ok {
		return v.(*decisionCounters)
	}
	if snap.cfg != nil && snap.cfg.Policies[p.Name] == p {
		v, _ := snap.counters.LoadOrStore(p, o.forPolicy(p.Name))
		return v.(*decisionCounters)
	}
	return o.forPolicy(p.Name) // a policy built outside the configuration (per request, tests): not kept
}

func (o *Observer) forPolicy(name string) *decisionCounters {
	return &decisionCounters{
		allowed:      o.decisions.WithLabelValues(name, DecisionAllowed),
		denied:       o.decisions.WithLabelValues(name, DecisionDenied),
		shadowDenied: o.decisions.WithLabelValues(name, DecisionShadowDenied),
	}
}

// Note records a decision on ctx's span, when tracing is on and the span
// records.
func (o *Observer) Note(ctx context.Context, d tracing.Decision) { o.tracer.Note(ctx, d) }

// Tracing reports whether ctx's span records what Note is given: build a
// tracing.Decision only then.
func (o *Observer) Tracing(ctx context.Context) bool {
	return o.tracer != nil && tracing.Recording(ctx)
}

// TracesKeys reports whether spans carry the rate limit keys.
func (o *Observer) TracesKeys() bool { return o.tracer != nil && o.tracer.Keys() }
