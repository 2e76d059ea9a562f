package sluice

import "context"

// Request asks a store to admit Cost units for Key under Policy.
type Request struct {
	Policy *Policy
	Key    string
	Cost   int64
}

// Store holds the per-key state and applies the algorithm math atomically.
//
// Stores receive requests through a Limiter, which has validated the policy, the
// key and the cost (see CheckRequest); a store may assume them valid. A store
// must still never decide a policy by an algorithm it does not name: given one
// of an unknown algorithm (only code that skipped Policy.Validate can), the
// stores of this module panic saying so before they change or send anything,
// as Decide does, rather than admit under a limit nobody set. Every store must
// pass the conformance suite in package storetest, which asserts the semantics
// documented on Result.
type Store interface {
	// Decide applies one request and returns its Result.
	Decide(ctx context.Context, req Request) (Result, error)
	// DecideAll applies several requests at one instant, all or nothing: either
	// every request is admitted and consumed, or none is and nothing changes.
	// It writes results[i] for reqs[i]; len(results) == len(reqs), and no two
	// requests share a (policy name, key). When the batch
	// is denied every result has Allowed false and the same RetryAfter, the largest
	// among the denying requests, after which the whole batch is admitted.
	DecideAll(ctx context.Context, reqs []Request, results []Result) error
}

// CheckRequest reports whether a request carries a key and a cost its (already
// validated) policy can decide: ErrInvalidKey, ErrInvalidCost or
// ErrExceedsCapacity, or ErrAcquireOnly for a Concurrency policy, whose slots
// are acquired (CheckSlotRequest), never decided.
func CheckRequest(req Request) error {
	// The common request passes on integer compares and one look at the
	// algorithm: a cost within both Limit and Burst is within the capacity,
	// whichever of them it is.
	p := req.Policy
	if n := len(req.Key); n != 0 && n <= MaxKeyLen && req.Cost >= 0 && req.Cost <= p.Limit && (p.Burst == 0 || req.Cost <= p.Burst) && p.Algorithm != Concurrency {
		return nil
	}
	if p.Algorithm == Concurrency {
		return errAcquireOnly(p)
	}
	if req.Key == "" {
		return errInvalidKeyEmpty
	}
	if len(req.Key) > MaxKeyLen {
		return &keyError{req.Key}
	}
	if req.Cost < 0 {
		return &costError{cost: req.Cost}
	}
	if req.Cost > req.Policy.capacity() {
		return &capacityError{policy: req.Policy.Name, cost: req.Cost, capacity: req.Policy.capacity()}
	}
	return nil
}

// Resetter is implemented by stores that can forget a key's state, returning
// it to its initial, unused state (an operator's reset; the service's admin
// API uses it).
type Resetter interface {
	Reset(ctx context.Context, p *Policy, key string) error
}
