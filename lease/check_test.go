package lease_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// admission is one admitted request: when (µs) and how many units.
type admission struct{ t, n int64 }

// overshoot is the worst observed ratio of admissions to what the policy
// promises over the same interval: per window for fixed_window; for the
// buckets, admitted in [ti, tj] against B + (tj−ti)/T. It fails the test when
// the admissions break the lease bound itself (B + (tj−ti+d)/T for buckets).
func overshoot(t *testing.T, p sluice.Policy, d time.Duration, adm []admission) float64 {
	t.Helper()
	worst := 0.0
	P, B, T := p.Period.Microseconds(), p.Capacity(), p.EmissionInterval().Microseconds()
	switch p.Algorithm {
	case sluice.FixedWindow:
		windows := map[int64]int64{}
		for _, a := range adm {
			windows[a.t-a.t%P] += a.n
		}
		for w, n := range windows {
			worst = max(worst, float64(n)/float64(p.Limit))
			if n > p.Limit {
				t.Errorf("window at %d admitted %d > L=%d", w, n, p.Limit)
			}
		}
	case sluice.TokenBucket, sluice.GCRA:
		for j := range adm {
			var sum int64
			for i := j; i >= 0; i-- {
				sum += adm[i].n
				span := adm[j].t - adm[i].t
				worst = max(worst, float64(sum)/(float64(B)+float64(span)/float64(T)))
				if (sum-B)*T > span+d.Microseconds() {
					t.Errorf("[%d, %d] admitted %d > B + (Δ+d)/T = %d + (%d+%d)/%d", adm[i].t, adm[j].t, sum, B, span, d.Microseconds(), T)
					return worst
				}
			}
		}
	}
	return worst
}

// cluster is several lease stores (nodes) over one remote store, driven by
// one fake clock.
type cluster struct {
	clock *storetest.Clock
	nodes []*lease.Store
	quiet func() // when set, called after each decision of a trace
}

func newCluster(remote sluice.Store, clock *storetest.Clock, n int, opts ...lease.Option) *cluster {
	c := &cluster{clock: clock}
	for range n {
		c.nodes = append(c.nodes, lease.New(remote, append([]lease.Option{lease.WithClock(clock)}, opts...)...))
	}
	return c
}

// trace drives the nodes with steps random requests: node 0 takes about half
// of them (skewed demand), the clock moves by up to maxStep now and then, and
// one in eight requests costs more than one unit. It returns the admissions.
func (c *cluster) trace(t *testing.T, p sluice.Policy, seed uint64, steps int, maxStep time.Duration) []admission {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, uint64(len(c.nodes))))
	var adm []admission
	for i := 0; i < steps; i++ {
		if rng.IntN(4) == 0 {
			c.clock.Advance(time.Duration(rng.Int64N(maxStep.Microseconds())+1) * time.Microsecond)
		}
		node := c.nodes[0]
		if rng.IntN(2) == 0 {
			node = c.nodes[rng.IntN(len(c.nodes))]
		}
		n := int64(1)
		if rng.IntN(8) == 0 {
			n = rng.Int64N(p.Capacity()) + 1
		}
		at := c.clock.Now().UnixMicro() // the instant the node decides at
		res, err := node.Decide(ctx, sluice.Request{Policy: &p, Key: "hot", Cost: n})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if c.quiet != nil {
			c.quiet()
		}
		if res.Allowed {
			adm = append(adm, admission{at, n})
		}
	}
	return adm
}

func units(adm []admission) int64 {
	var n int64
	for _, a := range adm {
		n += a.n
	}
	return n
}

func (c *cluster) stats() lease.Stats {
	var s lease.Stats
	for _, n := range c.nodes {
		st := n.Stats()
		s.Decisions += st.Decisions
		s.StoreCalls += st.StoreCalls
		s.Renewals += st.Renewals
	}
	return s
}

// leasedPolicies are the policies the traces run: each leased algorithm,
// with a burst below and above the limit for the buckets.
func leasedPolicies() []sluice.Policy {
	return []sluice.Policy{
		{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 200, Period: time.Second},
		{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 200, Period: time.Second},
		{Name: "tb-burst", Algorithm: sluice.TokenBucket, Limit: 200, Period: time.Second, Burst: 50},
		{Name: "gcra", Algorithm: sluice.GCRA, Limit: 300, Period: time.Second, Burst: 600},
	}
}
