package observe

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
)

// storeCollector reports, at each scrape, what the lease and memory layers
// of the store stack hold and have done. It reads their Stats rather than
// counting on the hot path, which then pays nothing for these metrics.
type storeCollector struct {
	stack  *storestack.Stack
	config func() *config.Config // the configuration in force

	leaseBound, leaseDecisions, leaseCalls, leases, leaseHeld          *prometheus.Desc
	memKeys, memBytes, memMaxKeys, memMaxBytes, memEvicted, memRefused *prometheus.Desc
	memCompactKeys, memCompactSlots, memSpilled, memDemoted, memFolded *prometheus.Desc
}

func newStoreCollector(st *storestack.Stack, cfg func() *config.Config) *storeCollector {
	role := []string{"store"}
	return &storeCollector{
		stack:           st,
		config:          cfg,
		leaseBound:      prometheus.NewDesc("sluice_lease_bound", "With leases, the proven worst-case ratio of admissions to the policy's own guarantee over any interval: 1 + ttl/(B·T) for token_bucket and gcra, 1 for fixed_window and for policies that are not leased.", []string{"policy"}, nil),
		leaseDecisions:  prometheus.NewDesc("sluice_lease_decisions_total", "Requests the lease layer decided, from a lease or on Redis.", nil, nil),
		leaseCalls:      prometheus.NewDesc("sluice_lease_store_calls_total", "Calls the lease layer made to Redis: reservations, releases and the decisions it could not take from a lease.", nil, nil),
		leases:          prometheus.NewDesc("sluice_lease_leases", "Leases this node holds (one per policy and key in use).", nil, nil),
		leaseHeld:       prometheus.NewDesc("sluice_lease_held_units", "Units this node holds unused in live leases: what it admits without asking Redis, and what it would strand if it died.", nil, nil),
		memKeys:         prometheus.NewDesc("sluice_memory_keys", "Keys the memory store holds; store is memory (the store itself) or local (the fallback of on_error: local).", role, nil),
		memBytes:        prometheus.NewDesc("sluice_memory_bytes", "Bytes the memory store's keys take, as charged against store.max_bytes.", role, nil),
		memMaxKeys:      prometheus.NewDesc("sluice_memory_max_keys", "The memory store's key bound (store.max_keys).", role, nil),
		memMaxBytes:     prometheus.NewDesc("sluice_memory_max_bytes", "The memory store's byte bound (store.max_bytes).", role, nil),
		memEvicted:      prometheus.NewDesc("sluice_memory_evictions_total", "Keys the memory store forgot before their reset to make room (each had used at most 1/64 of its capacity).", role, nil),
		memRefused:      prometheus.NewDesc("sluice_memory_refused_total", "Decisions denied because the memory store had nowhere to keep a new key's state (no compact part, or a policy past its 65,535th name and algorithm).", role, nil),
		memCompactKeys:  prometheus.NewDesc("sluice_memory_compact_keys", "States the memory store's compact part holds: keys its exact part had no room for.", role, nil),
		memCompactSlots: prometheus.NewDesc("sluice_memory_compact_slots", "States the memory store's compact part can hold (half of store.max_bytes, 16 bytes each).", role, nil),
		memSpilled:      prometheus.NewDesc("sluice_memory_spilled_total", "New keys the memory store kept in its compact part because its exact part was full: the store is under pressure.", role, nil),
		memDemoted:      prometheus.NewDesc("sluice_memory_demoted_total", "Keys the memory store moved, exactly, from its exact part to its compact part to make room for a key in use.", role, nil),
		memFolded:       prometheus.NewDesc("sluice_memory_folded_total", "States folded into a floor of the memory store's compact part because it was full: the keys sharing that floor are over-counted and may be denied.", role, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leaseBound, c.leaseDecisions, c.leaseCalls, c.leases, c.leaseHeld,
		c.memKeys, c.memBytes, c.memMaxKeys, c.memMaxBytes, c.memEvicted, c.memRefused,
		c.memCompactKeys, c.memCompactSlots, c.memSpilled, c.memDemoted, c.memFolded} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if ls := c.stack.Lease; ls != nil {
		st := ls.Stats()
		ch <- prometheus.MustNewConstMetric(c.leaseDecisions, prometheus.CounterValue, float64(st.Decisions))
		ch <- prometheus.MustNewConstMetric(c.leaseCalls, prometheus.CounterValue, float64(st.StoreCalls))
		ch <- prometheus.MustNewConstMetric(c.leases, prometheus.GaugeValue, float64(st.Leases))
		ch <- prometheus.MustNewConstMetric(c.leaseHeld, prometheus.GaugeValue, float64(st.Held))
		cfg := c.config()
		names := make([]string, 0, len(cfg.Policies))
		for name := range cfg.Policies {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := cfg.Policies[name]
			if p.DeniesAll() {
				continue // never reaches a store
			}
			ch <- prometheus.MustNewConstMetric(c.leaseBound, prometheus.GaugeValue, ls.Bound(&p.Policy), name)
		}
	}
	for role, ms := range map[string]*memory.Store{"memory": c.stack.Memory, "local": c.stack.Local} {
		if ms == nil {
			continue
		}
		st := ms.Stats()
		ch <- prometheus.MustNewConstMetric(c.memKeys, prometheus.GaugeValue, float64(st.Keys), role)
		ch <- prometheus.MustNewConstMetric(c.memBytes, prometheus.GaugeValue, float64(st.Bytes), role)
		ch <- prometheus.MustNewConstMetric(c.memMaxKeys, prometheus.GaugeValue, float64(st.MaxKeys), role)
		ch <- prometheus.MustNewConstMetric(c.memMaxBytes, prometheus.GaugeValue, float64(st.MaxBytes), role)
		ch <- prometheus.MustNewConstMetric(c.memEvicted, prometheus.CounterValue, float64(st.Evicted), role)
		ch <- prometheus.MustNewConstMetric(c.memRefused, prometheus.CounterValue, float64(st.Refused), role)
		ch <- prometheus.MustNewConstMetric(c.memCompactKeys, prometheus.GaugeValue, float64(st.ColdKeys), role)
		ch <- prometheus.MustNewConstMetric(c.memCompactSlots, prometheus.GaugeValue, float64(st.ColdSlots), role)
		ch <- prometheus.MustNewConstMetric(c.memSpilled, prometheus.CounterValue, float64(st.Spilled), role)
		ch <- prometheus.MustNewConstMetric(c.memDemoted, prometheus.CounterValue, float64(st.Demoted), role)
		ch <- prometheus.MustNewConstMetric(c.memFolded, prometheus.CounterValue, float64(st.Folded), role)
	}
}
