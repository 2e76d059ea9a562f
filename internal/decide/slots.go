package decide

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

// In-flight slots. A check of a Concurrency policy is not decided but
// acquires a slot of its key (sluice.SlotStore), which its holder gives back
// with Release when the request ends, or which returns by itself when its
// lease ends. Within a request the rules are sluice.AcquireAll's: the
// enforced slots are acquired first, in order, and once one is denied the
// others are only peeked at, as are the rate checks; when anything denies,
// the slots taken are given back, so a denied request holds nothing. A
// shadow slot check is acquired after an admitted request's enforced checks,
// like any shadow check, and must be released too.

// slot reports whether c acquires an in-flight slot rather than being
// decided.
func (c *Check) slot() bool { return c.Request.Policy.Algorithm == sluice.Concurrency }

// rated reports whether c is an enforced check decided by the store's
// Decide (or DecideAll): not a slot.
func (c *Check) rated() bool { return c.enforced() && !c.slot() }

// CheckRequest reports whether req can be decided: sluice.CheckRequest, or
// sluice.CheckSlotRequest for a slot (a cost of 1 to acquire, 0 to peek).
func CheckRequest(req sluice.Request) error {
	if req.Policy.Algorithm == sluice.Concurrency {
		return sluice.CheckSlotRequest(req)
	}
	return sluice.CheckRequest(req)
}

// decideOne decides req, c's request or a peek of it, on store: a slot check
// acquires (or peeks at) a slot, and returns its release token.
func decideOne(ctx context.Context, store sluice.Store, c *Check, req sluice.Request) (sluice.Result, error) {
	if !c.slot() {
		return store.Decide(ctx, req)
	}
	ss, err := slotStore(store)
	if err != nil {
		return sluice.Result{}, err
	}
	r, token, err := ss.AcquireSlot(ctx, req)
	c.Token = token
	return r, err
}

func slotStore(store sluice.Store) (sluice.SlotStore, error) {
	ss, ok := store.(sluice.SlotStore)
	if !ok {
		return nil, fmt.Errorf("decide: the store (%T) holds no in-flight slots: it does not implement sluice.SlotStore", store)
	}
	return ss, nil
}

// acquireSlots acquires a slot for each enforced slot check, in order, and
// reports whether all were admitted and whether there was any. After a
// denial the rest are only peeked at. On an error the slots taken are given
// back.
func acquireSlots(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result) (allowed, some bool, err error) {
	allowed = true
	for i := range checks {
		c := &checks[i]
		if !c.enforced() || !c.slot() {
			continue
		}
		some = true
		req := c.Request
		if !allowed {
			req.Cost = 0
		}
		r, err := decideOne(ctx, store, c, req)
		if err != nil {
			return false, true, errors.Join(err, Release(ctx, store, checks))
		}
		results[i] = r
		allowed = allowed && r.Allowed
	}
	return allowed, some, nil
}

// settleDenied gives back the slots of a denied request and makes its
// enforced results the denial's: each Allowed false with the largest
// RetryAfter among those that denied, and a slot given back counted as free
// again.
func settleDenied(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result) error {
	var wait sluice.Result
	for i := range checks {
		if checks[i].enforced() && !results[i].Allowed {
			wait.RetryAfter = max(wait.RetryAfter, results[i].RetryAfter)
		}
	}
	for i := range checks {
		c := &checks[i]
		if !c.enforced() {
			continue
		}
		if c.Token != "" {
			results[i].Remaining = min(results[i].Remaining+1, results[i].Limit)
		}
		results[i].Allowed, results[i].RetryAfter = false, wait.RetryAfter
	}
	if err := Release(ctx, store, checks); err != nil {
		return fmt.Errorf("decide: giving back the slots of a denied request: %w", err)
	}
	return nil
}

// Release gives back the slot each of checks holds (its Token) on its store
// and clears the tokens. It returns the failures of the releases that
// failed; those slots return when their lease ends.
func Release(ctx context.Context, store sluice.Store, checks []Check) error {
	var errs []error
	for i := range checks {
		c := &checks[i]
		if c.Token == "" {
			continue
		}
		token := c.Token
		c.Token = ""
		ss, err := slotStore(c.storeOf(store))
		if err == nil {
			_, err = ss.ReleaseSlot(ctx, c.Request.Policy, c.Request.Key, token)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
