package sluice

import "time"

// State is one key's stored state under one policy. The zero State is the initial
// (unused) state of every algorithm, and a store may forget a key whose state is
// back to zero. Times are microseconds since the Unix epoch; which fields an
// algorithm uses is documented in its file.
type State struct {
	Time  int64 // window start, last refill, or theoretical arrival time (TAT)
	Count int64 // units in the window, a token bucket's missing credit, or the log's sum
	Prev  int64 // units in the previous window (sliding window)
	Log   Log   // admitted entries (sliding log)
}

// Decide applies policy p to state s for a request of cost units at now
// (microseconds since the Unix epoch) and returns the new state and the Result.
// A denied request or a peek (cost 0) leaves the state's meaning unchanged.
//
// Decide is pure: it reads no clock and keeps nothing. p must be valid and cost
// within [0, p.Capacity()]; see CheckRequest. The new state may share s.Log's
// buffer, but only appends beyond s's entries, so s stays intact until the caller
// replaces it — which lets a store try a batch and drop it.
func Decide(p *Policy, s State, now, cost int64) (State, Result) {
	switch p.Algorithm {
	case FixedWindow:
		return fixedWindow(p, s, now, cost)
	case SlidingLog:
		return slidingLog(p, s, now, cost)
	case SlidingWindow:
		return slidingWindow(p, s, now, cost)
	case TokenBucket:
		return tokenBucket(p, s, now, cost)
	case LeakyBucket:
		return leakyBucket(p, s, now, cost)
	default:
		return gcra(p, s, now, cost)
	}
}

// micros converts microseconds to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
