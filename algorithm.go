package sluice

import "fmt"

// Algorithm names a rate limiting algorithm. Its string form is what configuration
// files and APIs use.
type Algorithm string

// The six algorithms. docs/algorithms.md explains when to choose each.
const (
	// FixedWindow counts units per window aligned to the epoch. Cheap, but up to
	// 2L can pass in one period that straddles a window boundary.
	FixedWindow Algorithm = "fixed_window"
	// SlidingLog remembers every admitted request of the last period: exact, at
	// the price of memory proportional to the limit.
	SlidingLog Algorithm = "sliding_log"
	// SlidingWindow weights the previous window's count by how much of it still
	// overlaps the sliding period: two counters, a close approximation of the log.
	SlidingWindow Algorithm = "sliding_window"
	// TokenBucket refills L tokens per period into a bucket of Burst tokens.
	TokenBucket Algorithm = "token_bucket"
	// LeakyBucket is a shaper: admitted requests are queued (at most Burst units)
	// and leave at the constant rate L per period; Result.Delay says when.
	LeakyBucket Algorithm = "leaky_bucket"
	// GCRA is the generic cell rate algorithm: the token bucket's decisions kept
	// in one stored timestamp (and the tolerance it was admitted under).
	GCRA Algorithm = "gcra"
)

// Algorithms lists every algorithm, in a stable order.
var Algorithms = []Algorithm{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, LeakyBucket, GCRA}

// ParseAlgorithm returns the Algorithm named s, or an error listing the valid names.
func ParseAlgorithm(s string) (Algorithm, error) {
	a := Algorithm(s)
	if a.valid() {
		return a, nil
	}
	return "", fmt.Errorf("sluice: unknown algorithm %q (want one of fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, gcra)", s)
}

func (a Algorithm) valid() bool {
	switch a {
	case FixedWindow, SlidingLog, SlidingWindow, TokenBucket, LeakyBucket, GCRA:
		return true
	}
	return false
}

// isBucket reports whether the algorithm has a Burst (a capacity other than L).
func (a Algorithm) isBucket() bool {
	return a == TokenBucket || a == LeakyBucket || a == GCRA
}

// String returns the algorithm's name.
func (a Algorithm) String() string { return string(a) }
