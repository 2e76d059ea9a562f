package sluice

import "fmt"

// Algorithm names a rate limiting algorithm. Its string form is what configuration
// files and APIs use.
type Algorithm string

// The algorithms. docs/algorithms.md explains when to choose each.
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
	// Concurrency limits requests in flight rather than a rate: at most
	// Limit slots of a key are held at once, each acquired by a request and
	// released when it ends, or Period after it was acquired if it never is
	// (concurrency.go). It is not in Algorithms: a Limiter acquires and
	// releases its slots (Acquire) instead of deciding costs (Allow).
	Concurrency Algorithm = "concurrency"
)

// Algorithms lists every rate algorithm, the ones Decide applies, in a
// stable order. Concurrency, which holds slots instead, is not among them.
var Algorithms = []Algorithm{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, LeakyBucket, GCRA}

// algorithmNames lists every valid name, for errors.
const algorithmNames = "fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, gcra, concurrency"

// ParseAlgorithm returns the Algorithm named s, or an error listing the valid names.
func ParseAlgorithm(s string) (Algorithm, error) {
	a := Algorithm(s)
	if a.valid() {
		return a, nil
	}
	return "", fmt.Errorf("sluice: unknown algorithm %q (want one of %s)", s, algorithmNames)
}

func (a Algorithm) valid() bool {
	switch a {
	case FixedWindow, SlidingLog, SlidingWindow, TokenBucket, LeakyBucket, GCRA, Concurrency:
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
