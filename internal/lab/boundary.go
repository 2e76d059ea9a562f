package lab

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// runBoundary sends a burst of L requests just before a window edge and
// another just after it, against each of Sluice's algorithms, and measures
// the most admitted in any span [t, t+P).
//
// The fixed window forgets its count at the edge, so both bursts pass: 2L
// within 2δ. The exact algorithms (sliding_log, and the buckets against their
// own B + L bound) cannot be fooled by the edge. sliding_window, an
// approximation, lets through the small share of the second burst its
// weighting allows.
func runBoundary(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	period, limit := micros(o.Period), o.Limit
	edge := virtualStart(period) + period
	// The bursts take 1% of a period on each side of the edge: "just before"
	// and "just after", yet wide enough for every request to get its own µs
	// when L is below P/100µs.
	delta := max(period/100, 1)
	var times []int64
	for j := range limit {
		times = append(times, edge-delta+j*delta/limit)
	}
	for j := range limit {
		times = append(times, edge+j*delta/limit)
	}

	r := &Report{Span: spanSliding + "; bound L, or B + L for the buckets"}
	for _, alg := range sluice.Algorithms {
		p, err := e.policy("lab-boundary", alg)
		if err != nil {
			return nil, err
		}
		clock := newVClock(edge - period)
		st := e.store("boundary-"+string(alg), clock)
		var admitted []int64
		for _, t := range times {
			clock.set(t)
			// Every node sends its share of each burst to the same key on
			// the shared store, so which node sent a request does not matter.
			ok, err := decide(ctx, st, p, "k")
			if err != nil {
				return nil, err
			}
			if ok {
				admitted = append(admitted, t)
			}
		}
		r.Rows = append(r.Rows, newRow(alg, string(alg), o.Nodes, int64(len(times)), int64(len(admitted)),
			maxSliding(admitted, period), slidingBound(p)))
	}
	fw := r.Rows[0]
	r.Summary = fmt.Sprintf("Bursts of L on both sides of a window edge: fixed_window admitted %d in one period (%.2f× L) because its count restarts at the edge; sliding_log and the buckets held their bounds, and sliding_window's approximation let through %.2f× L.",
		fw.MaxInSpan, fw.Overshoot, rowNamed(r, string(sluice.SlidingWindow)).Overshoot)
	return r, nil
}

// rowNamed returns the row whose Variant is name (a zero Row if none).
func rowNamed(r *Report, name string) Row {
	for _, row := range r.Rows {
		if row.Variant == name {
			return row
		}
	}
	return Row{}
}
