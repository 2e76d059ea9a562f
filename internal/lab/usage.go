package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/sluicehq/sluice"
)

// usageCall is one request of the usage scenario: checked when it arrives,
// its real cost known and charged when its response ends.
type usageCall struct {
	node       int
	start, end int64 // µs, virtual
	cost       int64
}

// usageCalls gives each node one request in flight at a time, back to back,
// each taking P/50 and costing, drawn with a fixed seed, a small amount
// (1 to L/10) four times in five and a large one (L/5 to L/2) otherwise —
// the tokens of a short or a long answer. Every node alone asks for about
// 4L per period, so the budget, not the traffic, sets what is used.
func usageCalls(start, period, limit int64, nodes, windows int, seed uint64) []usageCall {
	rng := rand.New(rand.NewPCG(seed, 0x75736167))
	took := max(period/50, 2)
	end := start + int64(windows)*period
	var out []usageCall
	for n := range nodes {
		// Nodes start a little apart, so their calls interleave.
		for t := start + int64(n)*took/int64(nodes); t+took <= end; t += took {
			cost := 1 + rng.Int64N(max(limit/20, 1))
			if rng.IntN(4) != 0 {
				cost = limit/10 + rng.Int64N(max(limit/4-limit/10, 1))
			}
			out = append(out, usageCall{node: n, start: t, end: t + took - 1, cost: max(cost, 1)})
		}
	}
	return out
}

// usageStep is a request's check (at its start) or its charge (at its end).
type usageStep struct {
	t      int64
	call   int
	charge bool
}

func usageSteps(calls []usageCall) []usageStep {
	steps := make([]usageStep, 0, 2*len(calls))
	for i, c := range calls {
		steps = append(steps, usageStep{t: c.start, call: i}, usageStep{t: c.end, call: i, charge: true})
	}
	slices.SortStableFunc(steps, func(a, b usageStep) int { return int(a.t - b.t) })
	return steps
}

// usageRun is what one variant of the budget did.
type usageRun struct {
	admitted, used, charged int64
	perWindow               map[int64]int64 // window start → units used by the responses ending in it
}

// runUsage runs both halves of the usage scenario: a budget charged after
// the responses (this file) and in-flight slots held by nodes, one of which
// is killed (usageslots.go).
func runUsage(ctx context.Context, e *env) (*Report, error) {
	r := &Report{Span: spanAligned + " (budget rows: units used by the responses that ended in it); bound L"}
	if err := usageBudget(ctx, e, r); err != nil {
		return nil, err
	}
	if err := usageSlots(ctx, e, r); err != nil {
		return nil, err
	}
	naive, charge := r.Rows[0], r.Rows[1]
	counter, slots := r.Rows[2], r.Rows[3]
	r.Summary = fmt.Sprintf("A budget charged after the responses: checking the estimate, then charging only what fits, used %.2f× the budget in a window (%d used, %d charged); a peek, then Limiter.Charge, used %.2f×, within the documented L + N·largest cost − 1 (%.2f×). In-flight slots after a node died holding some: a counter leaked %d of %d for good; slots with a lease leaked %d once the lease ended.",
		naive.Overshoot, *naive.Used, *naive.Charged, charge.Overshoot, float64(*charge.InFlightBound)/float64(charge.Bound),
		*counter.LeakedSlots, counter.Bound, *slots.LeakedSlots)
	return r, nil
}

// usageBudget compares, on a fixed_window budget of L units per period
// that every node's requests share, the classic check-then-charge-what-fits
// with Sluice's peek-then-Charge. Each request's real cost is known only
// when its response ends.
func usageBudget(ctx context.Context, e *env, r *Report) error {
	o := e.opts
	period := micros(o.Period)
	p, err := e.policy("lab-usage", sluice.FixedWindow)
	if err != nil {
		return err
	}
	start := virtualStart(period)
	calls := usageCalls(start, period, o.Limit, o.Nodes, o.Windows, o.Seed)
	steps := usageSteps(calls)
	// The estimate the naive check uses: a typical small answer.
	estimate := max(o.Limit/20, 1)
	largest := int64(0)
	for _, c := range calls {
		largest = max(largest, c.cost)
	}

	replay := func(name string, check func(sluice.Store) (bool, error), charge func(sluice.Store, int64) (bool, error)) (usageRun, error) {
		clock := newVClock(start)
		st := e.store(name, clock)
		run := usageRun{perWindow: map[int64]int64{}}
		admitted := make([]bool, len(calls))
		for _, s := range steps {
			clock.set(s.t)
			c := calls[s.call]
			if !s.charge {
				ok, err := check(st)
				if err != nil {
					return run, err
				}
				admitted[s.call] = ok
				if ok {
					run.admitted++
				}
				continue
			}
			if !admitted[s.call] {
				continue
			}
			// The response is over: its cost was used whatever the limiter says.
			run.used += c.cost
			run.perWindow[(s.t-start)/period] += c.cost
			ok, err := charge(st, c.cost)
			if err != nil {
				return run, err
			}
			if ok {
				run.charged += c.cost
			}
		}
		return run, nil
	}
	peek := func(st sluice.Store) (sluice.Result, error) {
		return st.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 0})
	}
	naive, err := replay("usage-naive", func(st sluice.Store) (bool, error) {
		res, err := peek(st)
		return res.Remaining >= estimate, err
	}, func(st sluice.Store, cost int64) (bool, error) {
		// All or nothing: a cost that does not fit is denied and not recorded.
		res, err := st.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: cost})
		return res.Allowed, err
	})
	if err != nil {
		return err
	}
	var lim *sluice.Limiter
	charged, err := replay("usage-charge", func(st sluice.Store) (bool, error) {
		res, err := peek(st)
		return res.Allowed, err
	}, func(st sluice.Store, cost int64) (bool, error) {
		if lim == nil {
			if lim, err = sluice.New(st, *p); err != nil {
				return false, err
			}
		}
		_, err := lim.Charge(ctx, "k", cost)
		return err == nil, err // recorded whether or not it fitted
	})
	if err != nil {
		return err
	}
	bound := o.Limit + int64(o.Nodes)*largest - 1
	for _, v := range []struct {
		name string
		run  usageRun
	}{{"naive: check, then charge what fits", naive}, {"sluice: charge", charged}} {
		most := int64(0)
		for _, u := range v.run.perWindow {
			most = max(most, u)
		}
		row := newRow(sluice.FixedWindow, v.name, o.Nodes, int64(len(calls)), v.run.admitted, most, o.Limit)
		row.Naive = v.name != "sluice: charge"
		used, chargedUnits, inFlight := v.run.used, v.run.charged, bound
		row.Used, row.Charged, row.InFlightBound = &used, &chargedUnits, &inFlight
		r.Rows = append(r.Rows, row)
	}
	return nil
}
