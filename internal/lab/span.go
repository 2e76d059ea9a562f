package lab

import (
	"slices"

	"github.com/sluicehq/sluice"
)

// The spans a Row's MaxInSpan is taken over. Every admission costs one unit,
// so a span's admitted units are the admission instants inside it.
const (
	// spanSliding: every half-open span [t, t+P), at any t — what a user means
	// by "L per P", and what sliding_log and sliding_window bound. For the
	// buckets the bound over such a span is B + L (B + L·Δ/P with Δ = P).
	spanSliding = "any span [t, t+P)"
	// spanAligned: every window [kP, (k+1)P) aligned to the epoch — all the
	// fixed window promises (docs/semantics.md), and what the naive fixed-window
	// counters try to keep.
	spanAligned = "aligned windows [kP, (k+1)P)"
)

// maxSliding returns the most instants (µs) in any half-open span
// [t, t+width). The maximum is reached with t at one of the instants, so a
// two-pointer sweep over the sorted instants finds it.
func maxSliding(ts []int64, width int64) int64 {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	var best, lo int
	for hi, t := range ts {
		for ts[lo] <= t-width {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return int64(best)
}

// maxAligned returns the most instants (µs) in one window [kP, (k+1)P).
func maxAligned(ts []int64, period int64) int64 {
	counts := make(map[int64]int64)
	var best int64
	for _, t := range ts {
		w := t / period
		counts[w]++
		best = max(best, counts[w])
	}
	return best
}

// slidingBound is what p promises for a span [t, t+P): L for the windows and
// the log, B + L for the buckets (their promise over a span Δ is B + L·Δ/P).
func slidingBound(p *sluice.Policy) int64 {
	switch p.Algorithm {
	case sluice.TokenBucket, sluice.LeakyBucket, sluice.GCRA:
		return p.Capacity() + p.Limit
	}
	return p.Limit
}
