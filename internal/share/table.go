package share

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fairshare"
)

// Headroom is the part of a policy's limit left out of its tenants' limits
// while some ask for more than their share: the policy's own limit, checked
// with each tenant's, then has room for the moments the tenants' arrivals
// bunch up or a tenant asks a little more than it did, so that one does
// not deny another within its share. It is taken from the tenants asking
// more than their share, in proportion to how much more: the one asking
// 100× its share gives up nearly all of it, one barely over its share
// nearly nothing.
const Headroom = 0.01

// isBucket reports whether p's algorithm keeps its state as a time.
func isBucket(p *sluice.Policy) bool {
	return p.Algorithm == sluice.TokenBucket || p.Algorithm == sluice.LeakyBucket || p.Algorithm == sluice.GCRA
}

// table is the shares in force of one policy.
type table struct {
	policy   sluice.Policy     // the policy they divide
	of       map[string]*entry // by tenant
	newcomer *entry            // for a tenant of weight 1 not on the board yet
}

// entry is one tenant's limit: rate units per the policy's period.
type entry struct {
	rate   float64
	policy sluice.Policy // the policy at that rate
}

// newEntry returns the limit of rate units per p's period. For the buckets
// it is exact (to the µs): p with Limit the whole units of rate (at least 1)
// and Period stretched so that Limit per Period is rate, Burst scaled with
// the rate; a bucket keeps its state as a time, which a new period reads as
// it was. The windows count per period: stretching it would move their
// windows at every recomputation, so they keep p's period and round the rate
// down to whole units — but for a rate below one unit, which stretches the
// period to one unit per 1/rate periods.
func newEntry(p *sluice.Policy, rate float64) *entry {
	rate = min(max(rate, 1e-6), float64(p.Limit))
	q := *p
	q.Limit = max(int64(rate), 1)
	switch {
	case isBucket(p):
		q.Period = stretch(p.Period, float64(q.Limit)/rate)
		if p.Burst > 0 {
			q.Burst = max(int64(float64(p.Burst)*rate/float64(p.Limit)), q.Limit)
		}
	case rate < 1:
		q.Period = stretch(p.Period, 1/rate)
	}
	if q.Validate() != nil {
		q = *p // out of what a policy can say (a rate too small): the policy's own
	}
	return &entry{rate: rate, policy: q}
}

// stretch returns d × f, whole µs, at least 1ms.
func stretch(d time.Duration, f float64) time.Duration {
	us := math.Round(float64(d.Microseconds()) * f)
	return max(time.Duration(us)*time.Microsecond, time.Millisecond)
}

// limit returns the policy a check of cost is decided under: the entry's,
// or, for a cost above its capacity, one that holds the cost at the same
// rate.
func (e *entry) limit(cost int64) *sluice.Policy {
	if cost <= e.policy.Capacity() {
		return &e.policy
	}
	q := e.policy
	if isBucket(&q) {
		q.Burst = cost
	} else {
		q.Period = stretch(q.Period, float64(cost)/float64(q.Limit))
		q.Limit = cost
	}
	if q.Validate() != nil {
		return &e.policy
	}
	return &q
}

// allocate divides p's limit among the tenants of demands (board entries of
// every node) and returns the table of their limits.
func allocate(p *sluice.Policy, demands []sluice.Demand) *table {
	type tenant struct{ demand, weight float64 }
	byTenant := make(map[string]*tenant, len(demands))
	for _, d := range demands {
		w, name, ok := parseMember(d.Member)
		if !ok {
			continue
		}
		t := byTenant[name]
		if t == nil {
			t = &tenant{}
			byTenant[name] = t
		}
		t.demand += max(d.Value, 0)
		t.weight = max(t.weight, w, 1e-9)
	}
	names := make([]string, 0, len(byTenant))
	claims := make([]fairshare.Claim, 0, len(byTenant))
	weights := 0.0
	for name, t := range byTenant {
		if t.demand <= 0 {
			continue // idle: a newcomer again when it returns
		}
		names = append(names, name)
		claims = append(claims, fairshare.Claim{Demand: t.demand, Weight: t.weight})
		weights += t.weight
	}
	capacity := float64(p.Limit)
	shares := fairshare.Allocate(capacity, claims, true)
	// The level: what an unsatisfied tenant gets per unit of weight. A
	// satisfied one may grow to it; without one, demand is below the limit
	// and the spare capacity is shared.
	level, excess := 0.0, 0.0
	for i, c := range claims {
		if shares[i] < c.Demand*(1-1e-9) {
			level = max(level, shares[i]/c.Weight)
			excess += c.Demand - shares[i]
		}
	}
	t := &table{policy: *p, of: make(map[string]*entry, len(names))}
	for i, name := range names {
		rate := max(shares[i], level*claims[i].Weight)
		if over := claims[i].Demand - shares[i]; over > 0 && excess > 0 {
			rate = shares[i] - min(shares[i]/2, Headroom*capacity*over/excess)
		}
		t.of[name] = newEntry(p, rate)
	}
	newcomer := capacity / (weights + 1)
	if level > 0 {
		newcomer = level
	}
	t.newcomer = newEntry(p, newcomer)
	return t
}
