package sluice

import (
	"fmt"
	"time"
)

// State is one key's stored state under one policy. The zero State is the initial
// (unused) state of every algorithm, and a store may forget a key whose state is
// back to zero. Times are microseconds since the Unix epoch; which fields an
// algorithm uses is documented in its file.
type State struct {
	Time  int64 // last admission (windows), last refill, or theoretical arrival time (TAT)
	Count int64 // units in the window, a token bucket's missing credit, the log's sum, or GCRA's tolerance
	Prev  int64 // units in the previous window (sliding window)
	Log   Log   // admitted entries (sliding log)
}

// Decide applies policy p to state s for a request of cost units at now
// (microseconds since the Unix epoch) and returns the new state and the Result.
// Only an admission of cost > 0 changes the state: for a peek or a denial Decide
// returns s itself, or the zero State when s has aged back to initial — so a
// store may write only admissions (Redis does) or write whatever Decide returns
// (memory does) and both answer alike. A peek (cost 0) answers as a request of
// one unit would, consuming nothing.
//
// Decide is pure: it reads no clock and keeps nothing. p must be valid and cost
// within [0, p.Capacity()]; see CheckRequest. A policy of an unknown algorithm
// is not decided by another one: Decide panics, naming it. The new state may
// share s.Log's buffer, but only appends beyond s's entries, so s stays intact
// until the caller replaces it — which lets a store try a batch and drop it.
func Decide(p *Policy, s State, now, cost int64) (State, Result) {
	var res Result
	DecideInPlace(p, &s, now, cost, &res)
	return s, res
}

// DecideInPlace is Decide updating *s to the new state and writing the Result
// into *res instead of returning them: a store that holds both in variables it
// may overwrite saves copying them through the calls. The rules are Decide's:
// *s changes only on an admission of cost > 0, or to the zero State when it has
// aged back to initial (ResetAfter 0); a peek or a denial leaves it exactly as
// it was (not a trimmed log or a moved refill time), so every store holds the
// same state afterwards.
func DecideInPlace(p *Policy, s *State, now, cost int64, res *Result) {
	// Each algorithm applies those rules itself, writing *s at most once at
	// its end: building a whole next State to throw away on a denial is what
	// this avoids. Each writes *res field by field where it stands: a Result
	// built in a local and returned was copied at every level, and reading it
	// back in wide loads from narrow stores stalled.
	switch p.Algorithm {
	case FixedWindow:
		fixedWindow(p, s, now, cost, res)
	case SlidingLog:
		slidingLog(p, s, now, cost, res)
	case SlidingWindow:
		slidingWindow(p, s, now, cost, res)
	case TokenBucket:
		tokenBucket(p, s, now, cost, res)
	case LeakyBucket:
		leakyBucket(p, s, now, cost, res)
	case GCRA:
		gcra(p, s, now, cost, res)
	default:
		// Deciding by another algorithm would enforce a limit nobody set,
		// and there is no error to return: only code that skipped
		// Policy.Validate gets here, and a panic admits nothing.
		unknownAlgorithm(p)
	}
}

// unknownAlgorithm panics saying p's algorithm is none of Sluice's.
func unknownAlgorithm(p *Policy) {
	panic(fmt.Sprintf("sluice: Decide: policy %q has unknown algorithm %q: validate policies with Policy.Validate (sluice.New does)", p.Name, string(p.Algorithm)))
}

// micros converts microseconds to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
