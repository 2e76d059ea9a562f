package rlqs

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's series, on the Service's registry; the Servers
// sharing a registry share them.
type metrics struct {
	streams     prometheus.Gauge
	buckets     prometheus.Gauge
	assignments *prometheus.CounterVec
	refused     *prometheus.CounterVec
}

// Values of sluice_rlqs_assignments_total's action label.
const (
	actionRequestsPerUnit = "requests_per_time_unit"
	actionTokenBucket     = "token_bucket"
	actionAllowAll        = "allow_all"
	actionDenyAll         = "deny_all"
	actionAbandon         = "abandon"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		streams: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_rlqs_streams",
			Help: "Rate limit quota service (RLQS) streams open.",
		})),
		buckets: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_rlqs_buckets",
			Help: "RLQS bucket subscriptions held, over every stream.",
		})),
		assignments: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rlqs_assignments_total",
			Help: "RLQS bucket actions sent, by action: requests_per_time_unit, token_bucket, allow_all, deny_all, abandon.",
		}, []string{"action"})),
		refused: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rlqs_refused_total",
			Help: "RLQS input refused, by reason: bucket_id, duration, count, unknown_policy, too_many_buckets, too_many_streams, domain, no_report.",
		}, []string{"reason"})),
	}
}

// register registers c on reg once per registry, however many Servers
// share it, and returns the collector registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			return are.ExistingCollector.(C)
		}
		panic(err)
	}
	return c
}
