package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// Slot is an in-flight slot a Limiter acquired for a key. Release gives it
// back when the request ends; a slot never released returns by itself one
// Period (the lease) after it was acquired. A Slot is safe for concurrent
// use.
type Slot struct {
	l        *Limiter
	key      string
	token    string
	released atomic.Bool
}

// Key returns the key the slot was acquired for.
func (s *Slot) Key() string { return s.key }

// Token returns the slot's release token, for a process that releases it
// elsewhere (Limiter.Release): whoever holds it can release the slot.
func (s *Slot) Token() string { return s.token }

// Release gives the slot back. It reports whether the store still held it:
// false when its lease had ended, or on a second call, which asks the store
// nothing. On an error the slot returns when its lease ends.
func (s *Slot) Release(ctx context.Context) (bool, error) {
	if s.released.Swap(true) {
		return false, nil
	}
	return s.l.Release(ctx, s.key, s.token)
}

// Acquire takes one of key's slots under the limiter's Concurrency policy: at
// most Limit are held at once. When it is admitted (res.Allowed) the caller
// holds the returned Slot until it calls Release; when it is denied the Slot
// is nil and res.RetryAfter says when the oldest slot's lease ends, the
// latest a slot becomes free (a release frees one sooner). Errors wrap
// ErrNotConcurrency, ErrInvalidKey or the store's own failure.
func (l *Limiter) Acquire(ctx context.Context, key string) (Result, *Slot, error) {
	req := Request{Policy: &l.policy, Key: key, Cost: 1}
	if err := CheckSlotRequest(req); err != nil {
		return Result{}, nil, err
	}
	res, token, err := l.store.(SlotStore).AcquireSlot(ctx, req)
	if err != nil || !res.Allowed {
		return res, nil, err
	}
	return res, &Slot{l: l, key: key, token: token}, nil
}

// Held reports key's slots under the limiter's Concurrency policy without
// acquiring one: Remaining is the slots free, ResetAfter the time until the
// last held is free if none is released.
func (l *Limiter) Held(ctx context.Context, key string) (Result, error) {
	req := Request{Policy: &l.policy, Key: key}
	if err := CheckSlotRequest(req); err != nil {
		return Result{}, err
	}
	res, _, err := l.store.(SlotStore).AcquireSlot(ctx, req)
	return res, err
}

// Release gives back key's slot that token holds (Slot.Token) and reports
// whether it was held: false for a token already released, whose lease had
// ended, or that is not one of key's. A process that acquired the slot
// releases it with Slot.Release; Release serves one that was handed the
// token.
func (l *Limiter) Release(ctx context.Context, key, token string) (bool, error) {
	if err := CheckSlotRequest(Request{Policy: &l.policy, Key: key}); err != nil {
		return false, err
	}
	return l.store.(SlotStore).ReleaseSlot(ctx, &l.policy, key, token)
}

// AcquireAll is AllowAll for sets that hold in-flight slots too — a
// per-client concurrency limit beside a rate limit, say. It acquires a slot
// for every Concurrency check, in order, then decides the other checks all or
// nothing with AllowAll. When anything denies, it gives back the slots it
// took, so the set holds and consumes nothing; every result then has Allowed
// false and the same RetryAfter, the largest among the denying checks, and a
// check that was not decided reports its state as a peek would. slots[i] is
// the Slot of checks[i] when it is a Concurrency check and all were admitted,
// else nil; ReleaseAll gives them back.
//
// It is not one instant: a slot is held while the rate checks are decided,
// and given back if they deny, so a concurrent request may meet it. A peek
// of a Concurrency check (Peek) reports its slots and takes none.
func AcquireAll(ctx context.Context, checks ...Check) (results []Result, slots []*Slot, err error) {
	if len(checks) == 0 {
		return nil, nil, nil
	}
	reqs, err := requests(checks, true)
	if err != nil {
		return nil, nil, err
	}
	store, _ := checks[0].Limiter.store.(SlotStore)
	results, slots = make([]Result, len(checks)), make([]*Slot, len(checks))
	var rates []int // the checks AllowAll decides
	denied := false
	for i, c := range checks {
		if reqs[i].Policy.Algorithm != Concurrency {
			rates = append(rates, i)
			continue
		}
		if denied {
			reqs[i].Cost = 0 // a peek, for the denial's results
		}
		var token string
		if results[i], token, err = store.AcquireSlot(ctx, reqs[i]); err != nil {
			return nil, nil, errors.Join(err, ReleaseAll(ctx, slots))
		}
		if token != "" {
			slots[i] = &Slot{l: c.Limiter, key: c.Key, token: token}
		}
		denied = denied || !results[i].Allowed
	}
	if len(rates) > 0 {
		rc := make([]Check, len(rates))
		for j, i := range rates {
			rc[j] = checks[i]
			if denied { // peek only, for the denial's results
				rc[j].Peek, rc[j].Cost = true, 0
			}
		}
		rr, err := AllowAll(ctx, rc...)
		if err != nil {
			return nil, nil, errors.Join(err, ReleaseAll(ctx, slots))
		}
		for j, i := range rates {
			results[i] = rr[j]
		}
		denied = denied || !rr[0].Allowed
	}
	if !denied {
		return results, slots, nil
	}
	err = ReleaseAll(ctx, slots)
	var wait Result
	for i := range results {
		if !results[i].Allowed && results[i].RetryAfter > wait.RetryAfter {
			wait.RetryAfter = results[i].RetryAfter
		}
		if slots[i] != nil { // acquired, then given back
			results[i].Remaining = min(results[i].Remaining+1, results[i].Limit)
		}
	}
	for i := range results {
		results[i].Allowed, results[i].RetryAfter = false, wait.RetryAfter
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sluice: AcquireAll: giving back the slots of a denied set: %w", err)
	}
	return results, make([]*Slot, len(checks)), nil
}

// ReleaseAll releases every slot of slots that is not nil, and returns the
// errors of those that failed.
func ReleaseAll(ctx context.Context, slots []*Slot) error {
	var errs []error
	for _, s := range slots {
		if s == nil {
			continue
		}
		if _, err := s.Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
