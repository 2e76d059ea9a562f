package share

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// pool is one fair-share policy on this node: its tenants' demand since the
// last recomputation, and the shares in force.
type pool struct {
	name     string
	policy   atomic.Pointer[sluice.Policy] // as last configured
	interval atomic.Int64                  // ns
	next     atomic.Int64                  // µs on the clock: when to recompute
	ticking  atomic.Bool
	table    atomic.Pointer[table]

	counts sync.Map // tenant → *counter
	last   int64    // µs: the last recomputation; recompute's own
	nodeID string
}

// counter is one tenant's demand on this node.
type counter struct {
	units  atomic.Int64
	weight atomic.Uint64 // float64 bits: the last weight seen
	idle   bool          // recompute's own: no demand in the last interval
}

// configure records p and interval as configured now, when they changed
// (a reload).
func (pl *pool) configure(p *sluice.Policy, interval time.Duration) {
	if cur := pl.policy.Load(); cur == nil || *cur != *p {
		q := *p
		pl.policy.Store(&q)
	}
	pl.interval.Store(int64(interval))
}

// count adds cost units of tenant's demand.
func (pl *pool) count(tenant string, cost int64, weight float64) {
	v, ok := pl.counts.Load(tenant)
	if !ok {
		v, _ = pl.counts.LoadOrStore(tenant, &counter{})
	}
	c := v.(*counter)
	c.units.Add(cost)
	if w := math.Float64bits(weight); c.weight.Load() != w {
		c.weight.Store(w)
	}
}

// drain returns the demand rate, in units per period, of each tenant counted
// since the last call (now µs), as this node's board entries, and forgets
// tenants idle for two intervals.
func (pl *pool) drain(now int64, period time.Duration) []sluice.Demand {
	elapsed := max(now-pl.last, 1)
	pl.last = now
	scale := float64(period.Microseconds()) / float64(elapsed)
	var out []sluice.Demand
	pl.counts.Range(func(k, v any) bool {
		c := v.(*counter)
		n := c.units.Swap(0)
		if n == 0 {
			if c.idle {
				pl.counts.Delete(k)
				return true
			}
			c.idle = true
		} else {
			c.idle = false
		}
		w := math.Float64frombits(c.weight.Load())
		out = append(out, sluice.Demand{Member: member(pl.nodeID, w, k.(string)), Value: float64(n) * scale})
		return true
	})
	return out
}
