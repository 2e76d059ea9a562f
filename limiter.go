package sluice

import (
	"context"
	"fmt"
)

// Limiter enforces one Policy on a Store. It is safe for concurrent use; the
// store does the synchronisation.
type Limiter struct {
	store  Store
	policy Policy
}

// New returns a Limiter for p on store, or the *PolicyError that p.Validate reports.
func New(store Store, p Policy) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("sluice: New: store is nil")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if _, ok := store.(SlotStore); !ok && p.Algorithm == Concurrency {
		return nil, fmt.Errorf("sluice: New: policy %q is a concurrency policy, and %T holds no slots (it does not implement SlotStore)", p.Name, store)
	}
	return &Limiter{store: store, policy: p}, nil
}

// Policy returns the limiter's policy.
func (l *Limiter) Policy() Policy { return l.policy }

// Store returns the store the limiter decides on.
func (l *Limiter) Store() Store { return l.store }

// Allow asks to admit one unit for key. It is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN asks to admit n units for key. n = 0 is a peek: it reports the state
// and consumes nothing, and is allowed when a request of one unit would be
// (denied, with its RetryAfter, once nothing is left). Errors wrap
// ErrInvalidKey, ErrInvalidCost, ErrExceedsCapacity or the store's own
// failure; a denial is not an error. A Limiter not built by New (its zero
// value, or nil) has no policy to enforce: every call is an error wrapping
// ErrInvalidPolicy.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	if l == nil || l.store == nil {
		return Result{}, errNotBuilt
	}
	req := Request{Policy: &l.policy, Key: key, Cost: n}
	if err := CheckRequest(req); err != nil {
		return Result{}, err
	}
	return l.store.Decide(ctx, req)
}

// Check is one (limiter, key, cost) of an AllowAll call. Its zero Cost
// means one unit, the common case; a check that only looks at the state
// says so with Peek.
type Check struct {
	Limiter *Limiter
	Key     string
	// Cost is how many units to admit; 0 means 1.
	Cost int64
	// Peek makes the check report the key's state without consuming
	// anything (cost 0); Cost must then be left 0. Like any check it takes
	// part in the all or nothing: a peek at a key with nothing left denies
	// the set.
	Peek bool
}

// cost is the units c asks for: Cost, 1 when Cost is left 0, 0 for a peek.
func (c Check) cost() (int64, error) {
	switch {
	case c.Peek && c.Cost != 0:
		return 0, &costError{c.Cost, "a peek consumes nothing: leave Cost 0"}
	case c.Peek:
		return 0, nil
	case c.Cost == 0:
		return 1, nil
	}
	return c.Cost, nil
}

// AllowAll admits every check or none, at one instant — for example a per-user
// limit and a global limit that must both hold. When it denies, nothing is
// consumed anywhere; every result has Allowed false and the same RetryAfter, the
// largest among the denying limits, after which the whole set is admitted.
// results[i] belongs to checks[i]. All limiters must share one store, and a
// (policy, key) pair may appear only once. A check without a Limiter, or with
// one not built by New, is an error naming its index (wrapping
// ErrInvalidPolicy), and nothing is decided.
func AllowAll(ctx context.Context, checks ...Check) ([]Result, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	reqs, err := requests(checks, false)
	if err != nil {
		return nil, err
	}
	results := make([]Result, len(checks))
	if err := checks[0].Limiter.store.DecideAll(ctx, reqs, results); err != nil {
		return nil, err
	}
	return results, nil
}

// requests checks the checks of one AllowAll (slots false) or AcquireAll
// (slots true: concurrency checks allowed) and returns their requests.
func requests(checks []Check, slots bool) ([]Request, error) {
	for i, c := range checks {
		switch {
		case c.Limiter == nil:
			return nil, fmt.Errorf("check %d: %w: the Limiter is nil", i, ErrInvalidPolicy)
		case c.Limiter.store == nil:
			return nil, fmt.Errorf("check %d: %w", i, errNotBuilt)
		}
	}
	store := checks[0].Limiter.store
	reqs := make([]Request, len(checks))
	for i, c := range checks {
		if c.Limiter.store != store {
			return nil, ErrStoreMismatch
		}
		cost, err := c.cost()
		if err == nil {
			reqs[i] = Request{Policy: &c.Limiter.policy, Key: c.Key, Cost: cost}
			if slots && reqs[i].Policy.Algorithm == Concurrency {
				err = CheckSlotRequest(reqs[i])
			} else {
				err = CheckRequest(reqs[i])
			}
		}
		if err != nil {
			return nil, fmt.Errorf("check %d (policy %q): %w", i, c.Limiter.policy.Name, err)
		}
		for j := range i {
			if reqs[j].Policy.Name == reqs[i].Policy.Name && reqs[j].Key == reqs[i].Key {
				return nil, fmt.Errorf("%w: checks %d and %d both name policy %q key %q; add their costs into one check",
					ErrDuplicateCheck, j, i, reqs[i].Policy.Name, reqs[i].Key)
			}
		}
	}
	return reqs, nil
}
