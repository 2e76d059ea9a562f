package sluice

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotChargeable is returned by Limiter.Charge and ChargeAll when the
// limiter's store does not implement Charger. Every store of this module
// does; a store of your own passes the conformance suite only once it does.
var ErrNotChargeable = errors.New("sluice: the store cannot charge usage")

// MaxCharge is the largest cost one charge records: a larger one is
// recorded as MaxCharge (about 4.5·10^15 units). Each algorithm also caps
// what a key can owe in all (docs/semantics.md, "Charging usage"), so that
// its math stays exact however much is charged.
const MaxCharge = maxSpan

// Charger is implemented by stores that can record usage that already
// happened — the tokens of a response, the bytes sent — whether or not the
// limit has room for it. Every store of this module implements it, and
// package storetest requires it.
//
// A charge is never denied and never an error for its size: its cost is
// consumed even beyond the limit, and the key then owes the excess (it is in
// debt), so requests are denied until time has repaid it — at the buckets'
// rate, or when the windows that hold it are over (docs/semantics.md).
type Charger interface {
	Store
	// Charge records req.Cost units of usage for (req.Policy, req.Key). Its
	// Result is the one Decide would give an admission of req.Cost when the
	// cost fits what is left (Allowed, without Delay); otherwise Allowed is
	// false, Remaining is what is left after the charge, negative when the
	// key owes units, and RetryAfter is when a request of one unit is
	// admitted again.
	Charge(ctx context.Context, req Request) (Result, error)
	// ChargeAll charges every request in turn, each as Charge would: it is
	// not all or nothing, since charges are never denied. It writes
	// results[i] for reqs[i]; len(results) == len(reqs), and a (policy,
	// key) may appear more than once (its charges add up).
	ChargeAll(ctx context.Context, reqs []Request, results []Result) error
}

// CheckCharge reports whether a charge carries a valid key and cost
// (ErrInvalidKey, ErrInvalidCost) and returns it with its cost at most
// MaxCharge. Unlike a decision, a charge above the policy's capacity is
// valid: the usage happened. A Concurrency policy holds slots, not units:
// charging it is ErrAcquireOnly.
func CheckCharge(req Request) (Request, error) {
	switch {
	case req.Policy.Algorithm == Concurrency:
		return req, errAcquireOnly(req.Policy)
	case req.Key == "":
		return req, errInvalidKeyEmpty
	case len(req.Key) > MaxKeyLen:
		return req, &keyError{req.Key}
	case req.Cost < 0:
		return req, &costError{cost: req.Cost}
	}
	req.Cost = min(req.Cost, MaxCharge)
	return req, nil
}

// Charge records n units of usage of key that already happened, such as the
// tokens a response used: they are consumed even when the limit has no room
// for them, and the key then owes the excess until time repays it. Check
// before the work with a peek (AllowN(ctx, key, 0): denied once nothing is
// left), then charge what it cost; the limit is then exceeded by at most
// what the requests in flight cost (docs/semantics.md, "Charging usage").
//
// The Result is AllowN's when n fits what is left. Otherwise Allowed is
// false, Remaining is negative while the key owes units, and RetryAfter is
// when a request of one unit is admitted again. Errors wrap ErrInvalidKey,
// ErrInvalidCost, ErrNotChargeable or the store's own failure; n above
// MaxCharge is recorded as MaxCharge.
func (l *Limiter) Charge(ctx context.Context, key string, n int64) (Result, error) {
	if l == nil || l.store == nil {
		return Result{}, errNotBuilt
	}
	c, ok := l.store.(Charger)
	if !ok {
		return Result{}, fmt.Errorf("%w (%T)", ErrNotChargeable, l.store)
	}
	req, err := CheckCharge(Request{Policy: &l.policy, Key: key, Cost: n})
	if err != nil {
		return Result{}, err
	}
	return c.Charge(ctx, req)
}

// Usage is one (limiter, key, cost) of a ChargeAll call: Cost units of key
// already used (0 records nothing).
type Usage struct {
	Limiter *Limiter
	Key     string
	Cost    int64
}

// ChargeAll charges every usage, in order, as Limiter.Charge does each:
// typically what one response cost, charged to every limit its request was
// checked against. Nothing is denied, so nothing is all or nothing; the
// stores make one call for usages that share a Redis node. results[i]
// belongs to usages[i]. All limiters must share one store.
func ChargeAll(ctx context.Context, usages ...Usage) ([]Result, error) {
	if len(usages) == 0 {
		return nil, nil
	}
	for _, u := range usages {
		if u.Limiter == nil || u.Limiter.store == nil {
			return nil, errNotBuilt
		}
	}
	store := usages[0].Limiter.store
	c, ok := store.(Charger)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", ErrNotChargeable, store)
	}
	reqs := make([]Request, len(usages))
	for i, u := range usages {
		if u.Limiter.store != store {
			return nil, ErrStoreMismatch
		}
		req, err := CheckCharge(Request{Policy: &u.Limiter.policy, Key: u.Key, Cost: u.Cost})
		if err != nil {
			return nil, fmt.Errorf("usage %d (policy %q): %w", i, u.Limiter.policy.Name, err)
		}
		reqs[i] = req
	}
	results := make([]Result, len(usages))
	if err := c.ChargeAll(ctx, reqs, results); err != nil {
		return nil, err
	}
	return results, nil
}
