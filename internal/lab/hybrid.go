package lab

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
)

// hybridTraffic is hybrid's demand: 2L per period in all, twice what the
// key may have, evenly spaced and skewed over the nodes — node 0 receives
// half of it, the others share the rest.
func hybridTraffic(start, period, limit int64, nodes, windows int) []arrival {
	perPeriod := 2 * limit
	gap := max(period/perPeriod, 1)
	out := make([]arrival, 0, perPeriod*int64(windows))
	for k := range perPeriod * int64(windows) {
		t := start + k*gap
		if t >= start+int64(windows)*period {
			break
		}
		node := 0
		if nodes > 1 && k%2 == 1 {
			node = 1 + int(k/2)%(nodes-1)
		}
		out = append(out, arrival{t: t, node: node})
	}
	return out
}

// settled is a lease node whose decisions return once the store calls they
// started in the background (releases) have ended: virtual time stands still
// while they run, as real time nearly does, so a run gives the same numbers
// every time.
type settled struct{ *lease.Store }

func (s settled) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	res, err := s.Store.Decide(ctx, req)
	for s.Stats().Background > 0 {
		runtime.Gosched()
	}
	return res, err
}

// countingCounter counts the store calls of the synced-counters variant.
type countingCounter struct {
	counter
	calls int64
}

func (c *countingCounter) get(ctx context.Context, key string) (int64, error) {
	c.calls++
	return c.counter.get(ctx, key)
}

func (c *countingCounter) incrBy(ctx context.Context, key string, n int64) (int64, error) {
	c.calls++
	return c.counter.incrBy(ctx, key, n)
}

// runHybrid compares, on the same traffic, Sluice's leases (lease.Store on
// every node over one shared store), the common "local counters synced every
// interval" design at the same interval as the lease TTL, and every decision
// on the store (exact), for fixed_window and token_bucket.
func runHybrid(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	period := micros(o.Period)
	start := virtualStart(period)
	traffic := hybridTraffic(start, period, o.Limit, o.Nodes, o.Windows)
	r := &Report{Span: spanAligned + " for fixed_window, bound L; " + spanSliding + " for token_bucket, bound B + L"}
	var leaseRows []Row
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.TokenBucket} {
		p, err := e.policy("lab-hybrid-"+string(alg), alg)
		if err != nil {
			return nil, err
		}
		clock := newVClock(start)
		remote := e.store("hybrid-lease-"+string(alg), clock)
		nodes := make([]*lease.Store, o.Nodes)
		for i := range nodes {
			nodes[i] = lease.New(remote, lease.WithClock(clock))
		}
		admitted, err := replay(ctx, traffic, clock, p, func(i int) sluice.Store { return settled{nodes[i]} })
		if err != nil {
			return nil, err
		}
		var calls, decisions int64
		for _, n := range nodes {
			if err := n.Shutdown(ctx); err != nil {
				return nil, err
			}
			st := n.Stats()
			calls, decisions = calls+st.StoreCalls, decisions+st.Decisions
		}
		row := hybridRow(fmt.Sprintf("sluice: leases, %s", alg), o, p, traffic, admitted, calls)
		bound := nodes[0].Bound(p)
		row.ProvenBound = &bound
		leaseRows = append(leaseRows, row)
		r.Rows = append(r.Rows, row)

		if alg == sluice.FixedWindow {
			row, err := runSynced(ctx, e, traffic, start, p, nodes[0].TTL(p))
			if err != nil {
				return nil, err
			}
			r.Rows = append(r.Rows, row)
		}

		exact := e.store("hybrid-exact-"+string(alg), clock)
		clock.set(start)
		admitted, err = replay(ctx, traffic, clock, p, func(int) sluice.Store { return exact })
		if err != nil {
			return nil, err
		}
		r.Rows = append(r.Rows, hybridRow(fmt.Sprintf("sluice: exact, %s", alg), o, p, traffic, admitted, int64(len(traffic))))
	}
	synced := r.Rows[1]
	r.Summary = fmt.Sprintf("Leases (TTL %v) kept overshoot at %.3f (fixed_window, bound %.2f) and %.3f (token_bucket, bound %.2f) with %.3f and %.3f store calls per decision and utilization %.2f and %.2f; local counters synced every %v overshot %.2f×.",
		o.Period/20, leaseRows[0].Overshoot, *leaseRows[0].ProvenBound, leaseRows[1].Overshoot, *leaseRows[1].ProvenBound,
		*leaseRows[0].StoreCallsPerDecision, *leaseRows[1].StoreCallsPerDecision,
		*leaseRows[0].Utilization, *leaseRows[1].Utilization, synced.Sync, synced.Overshoot)
	return r, nil
}

// runSynced runs the local counters synced every `every` (the naive cached
// counter of stale-cache) and counts its store calls.
func runSynced(ctx context.Context, e *env, traffic []arrival, start int64, p *sluice.Policy, every time.Duration) (Row, error) {
	period := micros(p.Period)
	c := &countingCounter{counter: e.counter("hybrid-synced")}
	s := &staleCache{c: c, period: period, limit: p.Limit, every: micros(every), nodes: make([]cachedNode, e.opts.Nodes)}
	for i := range s.nodes {
		s.nodes[i] = cachedNode{window: start / period, nextSync: start + int64(i)*s.every/int64(e.opts.Nodes)}
	}
	var admitted []int64
	for _, a := range traffic {
		ok, err := s.allow(ctx, a.node, a.t)
		if err != nil {
			return Row{}, err
		}
		if ok {
			admitted = append(admitted, a.t)
		}
	}
	row := hybridRow(fmt.Sprintf("naive: synced every %v, %s", every, p.Algorithm), e.opts, p, traffic, admitted, c.calls)
	row.Naive, row.Sync = true, every
	return row, nil
}

// hybridRow measures one variant: overshoot over the spans the policy bounds,
// store calls per decision, and utilization — admitted ÷ the most the policy
// admits over the run (L per window; B + L per period for the bucket).
func hybridRow(variant string, o Options, p *sluice.Policy, traffic []arrival, admitted []int64, calls int64) Row {
	period := micros(p.Period)
	sent := int64(len(traffic))
	var row Row
	most := p.Limit * int64(o.Windows)
	if p.Algorithm == sluice.FixedWindow {
		row = newRow(p.Algorithm, variant, o.Nodes, sent, int64(len(admitted)), maxAligned(admitted, period), p.Limit)
	} else {
		row = newRow(p.Algorithm, variant, o.Nodes, sent, int64(len(admitted)), maxSliding(admitted, period), slidingBound(p))
		most += p.Capacity()
	}
	perDecision := float64(calls) / float64(sent)
	utilization := float64(len(admitted)) / float64(most)
	row.StoreCallsPerDecision, row.Utilization = &perDecision, &utilization
	return row
}
