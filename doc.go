// Package sluice is a rate limiter whose decisions mean the same thing whichever
// store holds the state: the embedded memory store for one process, or Redis and
// Redis Cluster when many nodes must share one count.
//
// # The model
//
// A [Policy] names an [Algorithm], a Limit L, a Period P and, for the bucket
// algorithms, a Burst B. A request asks to admit a cost n for a key at an instant.
// The store applies the algorithm to that key's state and answers with a [Result]:
// whether the cost was admitted (and consumed), how much is left, and — when it was
// denied — exactly how long to wait before the same request is admitted.
//
// Time is kept in whole microseconds, the resolution of Redis TIME, so that every
// store computes the same answer for the same sequence of requests. Windows are
// aligned to the Unix epoch. The bucket algorithms release one unit every
// emission interval T = P/L, rounded up to a whole microsecond so the rate never
// exceeds L per P.
//
// # Using it
//
//	store := memory.New()
//	lim, err := sluice.New(store, sluice.Policy{
//		Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute,
//	})
//	...
//	res, err := lim.Allow(ctx, apiKey)
//	if err == nil && !res.Allowed {
//		// reply 429, Retry-After: res.RetryAfter
//	}
//
// Several limits that must hold together (per user and global) are checked with
// [AllowAll]: all are admitted or none is, and a denial consumes nothing.
//
// A [Concurrency] policy limits requests in flight instead: [Limiter.Acquire]
// takes one of a key's Limit slots and returns a [Slot] to release when the
// request ends; a slot never released returns after Period, its lease.
// [AcquireAll] combines slots with rate limits.
//
// The algorithm math is pure: [Decide] takes the state, the policy, the instant
// and the cost and returns the new state and the Result. Stores only add storage,
// locking and a clock around it (the Redis store runs the same math in Lua).
package sluice
