package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
)

// arrival is one request of the simulated traffic: when, and which node
// received it.
type arrival struct {
	t    int64 // µs, virtual
	node int
}

// steadyTraffic is what nodes and stale-cache send: requests evenly spaced,
// dealt round-robin to the nodes, each node receiving 2L per period — twice
// what the key may have in total even from one node, so every limiter must
// deny and the limit, not the traffic, sets what is admitted.
func steadyTraffic(start, period, limit int64, nodes, windows int) []arrival {
	perPeriod := 2 * limit * int64(nodes)
	gap := max(period/perPeriod, 1)
	n := perPeriod * int64(windows)
	out := make([]arrival, 0, n)
	for k := range n {
		t := start + k*gap
		if t >= start+int64(windows)*period {
			break
		}
		out = append(out, arrival{t: t, node: int(k % int64(nodes))})
	}
	return out
}

// runNodes compares N nodes that each limit with their own in-process store
// — the per-node counter that looks right on one machine — with N nodes
// sharing one store. Each per-node limiter admits L per window, so together
// they admit N·L: the limit is multiplied by the number of nodes.
func runNodes(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	period := micros(o.Period)
	p, err := e.policy("lab-nodes", sluice.FixedWindow)
	if err != nil {
		return nil, err
	}
	start := virtualStart(period)
	traffic := steadyTraffic(start, period, o.Limit, o.Nodes, o.Windows)
	clock := newVClock(start)

	// Naive: a memory store per node, whatever store the run uses — the
	// counter lives in each node's process.
	perNode := make([]sluice.Store, o.Nodes)
	for i := range perNode {
		perNode[i] = memory.New(memory.WithClock(clock))
	}
	shared := e.store("nodes", clock)

	run := func(storeOf func(node int) sluice.Store) ([]int64, error) {
		return replay(ctx, traffic, clock, p, storeOf)
	}
	naive, err := run(func(i int) sluice.Store { return perNode[i] })
	if err != nil {
		return nil, err
	}
	clock.set(start)
	atomic, err := run(func(int) sluice.Store { return shared })
	if err != nil {
		return nil, err
	}
	sent := int64(len(traffic))
	r := &Report{Span: spanAligned + "; bound L (fixed_window)"}
	naiveRow := newRow(sluice.FixedWindow, "naive: a counter per node", o.Nodes, sent, int64(len(naive)), maxAligned(naive, period), o.Limit)
	naiveRow.Naive = true
	r.Rows = append(r.Rows, naiveRow,
		newRow(sluice.FixedWindow, "sluice: one shared store", o.Nodes, sent, int64(len(atomic)), maxAligned(atomic, period), o.Limit))
	r.Summary = fmt.Sprintf("%d nodes each counting in their own process admitted %.2f× the limit per window, one per node; sharing one store kept it at %.2f×.",
		o.Nodes, r.Rows[0].Overshoot, r.Rows[1].Overshoot)
	return r, nil
}

// replay sends traffic, one unit of key "k" per arrival at its virtual
// instant, to the store storeOf gives each node, and returns the admission
// instants.
func replay(ctx context.Context, traffic []arrival, clock *vclock, p *sluice.Policy, storeOf func(int) sluice.Store) ([]int64, error) {
	var admitted []int64
	for _, a := range traffic {
		clock.set(a.t)
		store := storeOf(a.node)
		ok, err := decide(ctx, store, p, "k")
		if err != nil {
			return nil, err
		}
		settle(store)
		if ok {
			admitted = append(admitted, a.t)
		}
	}
	return admitted, nil
}

// settle waits for the store calls a lease node makes in the background
// (renewals, releases) to finish: they take no virtual time, so the replay
// gives the same numbers on every run and on every store.
func settle(s sluice.Store) {
	ls, ok := s.(*lease.Store)
	if !ok {
		return
	}
	for ls.Stats().Background > 0 {
		time.Sleep(20 * time.Microsecond)
	}
}
