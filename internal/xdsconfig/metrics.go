package xdsconfig

import "github.com/prometheus/client_golang/prometheus"

// metrics are the client's Prometheus metrics.
type metrics struct {
	updates   *prometheus.CounterVec
	connected prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_xds_updates_total",
			Help: "Versions received from the xDS server, by result: accepted (ACKed and in force) or rejected (NACKed; the configuration in force stays).",
		}, []string{"result"}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_xds_connected",
			Help: "1 while the stream to the xDS server is open and has answered, else 0.",
		}),
	}
	m.updates.WithLabelValues("accepted")
	m.updates.WithLabelValues("rejected")
	if reg != nil {
		for _, c := range []prometheus.Collector{m.updates, m.connected} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
