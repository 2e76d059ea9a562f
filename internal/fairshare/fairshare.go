// Package fairshare divides one capacity among claimants by weighted max-min
// fairness (water-filling): raise a common level until the capacity is used;
// a claimant gets its weight times the level, but never more than it asks
// for. So one that asks for less than its share gets all it asks for and is
// never limited by the others, and what it leaves is shared by those that
// want more, in proportion to their weights.
//
// The allocation is a pure function of the claims: callers decide how demand
// is measured (a rate over an interval, a report from an Envoy) and how often
// shares are recomputed.
package fairshare

import (
	"cmp"
	"slices"
)

// Claim is what one claimant asks for, and how much it counts.
type Claim struct {
	// Demand is what the claimant would use, in the capacity's unit (for
	// example requests per second). A negative demand counts as 0.
	Demand float64
	// Weight is the claimant's weight; 0 or less counts as 1.
	Weight float64
}

// Allocate returns each claim's share of capacity, in the claims' order: the
// weighted max-min fair allocation, in which no share exceeds its demand.
// When the demands sum to less than capacity, every claimant gets its demand
// and, with spare, the capacity left over is added to the shares in
// proportion to the weights — so the shares always sum to capacity, as a
// quota handed out to clients whose demand may grow must. Without spare the
// shares sum to min(capacity, total demand). It runs in O(n log n) for n
// claims and does not modify claims.
func Allocate(capacity float64, claims []Claim, spare bool) []float64 {
	shares := make([]float64, len(claims))
	if len(claims) == 0 || capacity <= 0 {
		return shares
	}
	order := make([]int, len(claims))
	var weights float64
	for i := range claims {
		order[i] = i
		weights += weightOf(claims[i])
	}
	// Claimants in the order their demand is met as the level rises.
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Compare(demandOf(claims[a])/weightOf(claims[a]), demandOf(claims[b])/weightOf(claims[b]))
	})
	left, weightsLeft := capacity, weights
	for k, i := range order {
		level := left / weightsLeft
		c := claims[i]
		if d := demandOf(c); d <= weightOf(c)*level {
			shares[i] = d
			left -= d
			weightsLeft -= weightOf(c)
			continue
		}
		// Every claimant from here on wants more than the level gives.
		for _, j := range order[k:] {
			shares[j] = weightOf(claims[j]) * level
		}
		return shares
	}
	if spare && left > 0 {
		for i := range shares {
			shares[i] += left * weightOf(claims[i]) / weights
		}
	}
	return shares
}

func demandOf(c Claim) float64 { return max(0, c.Demand) }

func weightOf(c Claim) float64 {
	if c.Weight <= 0 {
		return 1
	}
	return c.Weight
}
