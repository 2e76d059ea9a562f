package observe

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/internal/share"
)

// sharesCollector reports, at each scrape, the fair-share policies' shares
// in force on this node, read from the Sharer: decisions pay nothing for it.
type sharesCollector struct {
	sharer         *share.Sharer
	tenants, level *prometheus.Desc
}

// WatchShares exports the shares of the fair-share policies (share: fair)
// that s keeps.
func (o *Observer) WatchShares(s *share.Sharer) {
	policy := []string{"policy"}
	o.registry.MustRegister(&sharesCollector{
		sharer:  s,
		tenants: prometheus.NewDesc("sluice_fair_share_tenants", "Tenants of a fair-share policy (share: fair) with a share: those asking, on any node, as of the last recomputation of the shares.", policy, nil),
		level:   prometheus.NewDesc("sluice_fair_share_level", "The limit, in units per period of a fair-share policy, of a tenant of weight 1 not yet on the board: while some tenants ask for more than they get, the water level every one of them is limited to per unit of weight; otherwise an equal part of the limit.", policy, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *sharesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tenants
	ch <- c.level
}

// Collect implements prometheus.Collector.
func (c *sharesCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.sharer.Stats() {
		ch <- prometheus.MustNewConstMetric(c.tenants, prometheus.GaugeValue, float64(st.Tenants), st.Policy)
		ch <- prometheus.MustNewConstMetric(c.level, prometheus.GaugeValue, st.Level, st.Policy)
	}
}
