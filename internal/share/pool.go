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
	// spans are the lengths (µs) of the last intervals, a ring at pos, which
	// each counter's slots follow: demand is measured over about a period,
	// so that a tenant asking a few units a period is not seen at random as
	// asking nothing or twice its rate. recompute's own.
	spans []int64
	pos   int
}

// maxSlots bounds how many intervals demand is measured over.
const maxSlots = 16

// counter is one tenant's demand on this node.
type counter struct {
	units  atomic.Int64
	weight atomic.Uint64 // float64 bits: the last weight seen
	slots  []int64       // recompute's own: units in each of the pool's spans
	idle   bool          // recompute's own: its 0 was posted
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

// drain returns the demand rate, in units per period, of each tenant over
// the last intervals (about a period of them) to now (µs), as this node's
// board entries, and forgets tenants that asked nothing in all of them
// after posting their 0 once.
func (pl *pool) drain(now int64, period, interval time.Duration) []sluice.Demand {
	k := int(min(max((2*period+interval-1)/max(interval, 1), 1), maxSlots))
	if len(pl.spans) != k {
		pl.spans, pl.pos = make([]int64, k), 0
	} else {
		pl.pos = (pl.pos + 1) % k
	}
	pl.spans[pl.pos] = max(now-pl.last, 1)
	pl.last = now
	var spanned int64
	for _, sp := range pl.spans {
		spanned += sp
	}
	scale := float64(period.Microseconds()) / float64(spanned)
	var out []sluice.Demand
	pl.counts.Range(func(key, v any) bool {
		c := v.(*counter)
		if len(c.slots) != k {
			c.slots = make([]int64, k)
		}
		c.slots[pl.pos] = c.units.Swap(0)
		var n int64
		for _, u := range c.slots {
			n += u
		}
		if n == 0 && c.idle {
			pl.counts.Delete(key) // its 0 was posted last time
			return true
		}
		c.idle = n == 0
		w := math.Float64frombits(c.weight.Load())
		out = append(out, sluice.Demand{Member: member(pl.nodeID, w, key.(string)), Value: float64(n) * scale})
		return true
	})
	return out
}
