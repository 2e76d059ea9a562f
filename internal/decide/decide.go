// Package decide is Sluice's one decision routine. Given the checks of one
// request, each a store request with how it applies, it decides them on a
// store: the enforced checks all or nothing, the shadow checks apart, bans and
// costs over capacity without asking the store, quota-mode checks as soft
// limits. The server (package engine) and the library's middlewares
// (httplimit and grpclimit, through limitcore) all decide with it, so each of
// these rules is written once. It depends on the root package alone.
//
// The rules:
//
//   - A request is blocked, denied before anything is charged, when the caller
//     refuses it, when an enforced check is a ban (a policy admitting nothing)
//     with a cost, when an enforced check's cost is over its policy's capacity,
//     or when it has quota-mode checks and none has room for its cost (they
//     are peeked at first). Every other check of a blocked request is only
//     peeked at, in one store call, for what it reports.
//
//   - Otherwise the enforced checks are decided together: one store Decide for
//     one check, DecideAll for several. When any denies, nothing is consumed.
//
//   - Shadow checks never deny. Each is decided on its own after the enforced
//     ones: charged when the request was admitted, peeked at when it was
//     denied (a denied request consumes nothing). One over its capacity is
//     peeked at and would have denied. A store failure of a shadow check
//     fails nothing: it is returned in Outcome.ShadowErrors.
//
//   - When every quota-mode check of an admitted request turns out exhausted
//     (another request took the last units meanwhile), the request is denied
//     after all: Outcome.QuotaDenied.
//
//   - A check of a Concurrency policy acquires an in-flight slot instead
//     (see slots.go): the enforced slots first, all or nothing with the
//     other checks; an admitted request's slots are given back with Release.
//
// A store failure of the enforced checks (or of a blocked request's peek) is
// returned as it is, for the caller to apply its fail policy.
package decide

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice"
)

// Flags say how a check applies. Decide reads Shadow, Ban, OverCapacity and
// Quota, and sets Exhausted and Failed.
type Flags uint8

const (
	// Shadow: the check never denies the request; it is decided apart.
	Shadow Flags = 1 << iota
	// Ban: the check's policy admits nothing (a limit of 0: an Envoy file's
	// requests_per_unit: 0). It never reaches a store; its Result is zero.
	Ban
	// OverCapacity: the cost is above anything the policy can admit.
	OverCapacity
	// Quota: a quota-mode check, with Shadow: a soft limit, but a request
	// none of whose quota-mode checks has room is denied.
	Quota
	// Exhausted, set by Decide: the check could not admit its cost. For a
	// denied request's enforced checks, these are the ones that denied it;
	// for a shadow check, it would have denied; for a quota-mode one, it has
	// no quota left.
	Exhausted
	// Failed, set by Decide: the store failed this shadow check (see
	// Outcome.ShadowErrors); its Result is zero.
	Failed
)

// Check is one check of a request.
type Check struct {
	// Request is what is asked of the store: the policy applied, the key and
	// the cost (0: a peek).
	Request sluice.Request
	Flags   Flags
	// Store, when set, is the store a shadow check is decided on instead
	// of the request's (a library user's shadow limit may live elsewhere);
	// nil for every other check.
	Store sluice.Store
	// Token, set by Decide, releases the in-flight slot a Concurrency check
	// holds for an admitted request (see Release); "" for every other check.
	Token string
}

// Outcome is what Decide decided for a request.
type Outcome struct {
	// Allowed: the request is admitted.
	Allowed bool
	// Blocked: it was denied before anything was charged (see the package
	// rules); every check was only peeked at.
	Blocked bool
	// QuotaDenied: the enforced checks admitted it, and were charged, but
	// no quota-mode check had room left, so it is denied.
	QuotaDenied bool
	// ShadowErrors are the store failures of shadow checks, which fail
	// nothing.
	ShadowErrors []ShadowError
}

// ShadowError is the store failure of the shadow check checks[Index].
type ShadowError struct {
	Index int
	Err   error
}

func (c *Check) enforced() bool { return c.Flags&(Shadow|Ban) == 0 }

// storeOf is the store c is decided on.
func (c *Check) storeOf(store sluice.Store) sluice.Store {
	if c.Store != nil {
		return c.Store
	}
	return store
}

// Decide decides checks on store by the package rules and writes
// results[i] for checks[i] (len(results) == len(checks)). refused denies
// the request whatever its checks say. The checks must be valid for their
// policies (sluice.CheckRequest), but for the cost of a ban or a check over
// capacity, and name distinct (policy, key) pairs.
func Decide(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result, refused bool) (Outcome, error) {
	var all Flags
	blocked := refused
	for i := range checks {
		c := &checks[i]
		c.Flags &^= Exhausted | Failed
		c.Token = ""
		all |= c.Flags
		if c.Flags&Shadow == 0 && (c.Flags&OverCapacity != 0 || c.Flags&Ban != 0 && c.Request.Cost > 0) {
			blocked = true
		}
	}
	if !blocked && all&Quota != 0 && quotaGone(ctx, store, checks) {
		blocked = true
	}
	if blocked {
		return Outcome{Blocked: true}, peekAll(ctx, store, checks, results)
	}
	allowed, err := decideEnforced(ctx, store, checks, results)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Allowed: allowed}
	if all&(Shadow|Ban) != 0 {
		out.ShadowErrors = decideShadow(ctx, store, checks, results, allowed)
	}
	if !allowed || all&Shadow != 0 {
		markExhausted(checks, results, allowed)
	}
	if allowed && all&Quota != 0 && quotaExhausted(checks) {
		out.Allowed, out.QuotaDenied = false, true
		if err := Release(ctx, store, checks); err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// decideEnforced decides the enforced checks all or nothing: the slots of
// Concurrency checks first (acquireSlots), then the others with one Decide
// for one check (the common case, and the cheaper call), DecideAll
// otherwise, only peeked at when a slot was denied. When anything denies,
// the slots taken are given back (settleDenied). No enforced check is an
// admitted request.
func decideEnforced(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result) (bool, error) {
	allowed, slots, err := acquireSlots(ctx, store, checks, results)
	if err != nil {
		return false, err
	}
	rated, err := decideRates(ctx, store, checks, results, !allowed)
	if err != nil {
		return false, errors.Join(err, Release(ctx, store, checks))
	}
	allowed = allowed && rated
	if !allowed && slots {
		if err := settleDenied(ctx, store, checks, results); err != nil {
			return false, err
		}
	}
	return allowed, nil
}

// decideRates decides the enforced checks that are not slots, together;
// peek only reads them (a slot denied the request).
func decideRates(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result, peek bool) (bool, error) {
	n, last := 0, -1
	for i := range checks {
		if checks[i].rated() {
			n, last = n+1, i
		}
	}
	req := func(i int) sluice.Request {
		if peek {
			return peekOf(checks[i].Request)
		}
		return checks[i].Request
	}
	switch n {
	case 0:
		return true, nil
	case 1:
		r, err := store.Decide(ctx, req(last))
		if err != nil {
			return false, err
		}
		results[last] = r
		return r.Allowed && !peek, nil
	}
	reqs := make([]sluice.Request, 0, n)
	for i := range checks {
		if checks[i].rated() {
			reqs = append(reqs, req(i))
		}
	}
	res := results
	if n < len(checks) {
		res = make([]sluice.Result, n)
	}
	if err := store.DecideAll(ctx, reqs, res); err != nil {
		return false, err
	}
	allowed := !peek
	j := 0
	for i := range checks {
		if !checks[i].rated() {
			continue
		}
		results[i] = res[j]
		allowed = allowed && res[j].Allowed
		j++
	}
	return allowed, nil
}

// decideShadow decides each shadow check on its own, so that none can deny
// the request or keep another from counting it, and gives bans their zero
// Result.
func decideShadow(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result, admitted bool) []ShadowError {
	var errs []ShadowError
	for i := range checks {
		c := &checks[i]
		switch {
		case c.Flags&Ban != 0:
			results[i] = sluice.Result{}
			continue
		case c.Flags&Shadow == 0:
			continue
		}
		req := c.Request
		peek := !admitted || c.Flags&OverCapacity != 0
		if peek {
			req.Cost = 0
		}
		r, err := decideOne(ctx, c.storeOf(store), c, req)
		if err != nil {
			c.Flags |= Failed
			results[i] = sluice.Result{}
			errs = append(errs, ShadowError{Index: i, Err: err})
			continue
		}
		if peek {
			r.Allowed = false // not charged: it would not have been admitted
		}
		results[i] = r
	}
	return errs
}

// peekAll reads the state of every check but the bans without charging
// anything, in one store call, for a blocked request: every result is a
// denial. A check on a store of its own is peeked at there, apart.
func peekAll(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result) error {
	n, last := 0, -1
	for i := range checks {
		c := &checks[i]
		switch {
		case c.Flags&Ban != 0:
		case !c.peekedTogether():
			r, err := decideOne(ctx, c.storeOf(store), c, peekOf(c.Request))
			if err != nil {
				return err
			}
			results[i] = r
		default:
			n, last = n+1, i
		}
	}
	switch n {
	case 0:
	case 1:
		r, err := store.Decide(ctx, peekOf(checks[last].Request))
		if err != nil {
			return err
		}
		results[last] = r
	default:
		reqs := make([]sluice.Request, 0, n)
		for i := range checks {
			if checks[i].peekedTogether() {
				reqs = append(reqs, peekOf(checks[i].Request))
			}
		}
		res := results
		if n < len(checks) {
			res = make([]sluice.Result, n)
		}
		if err := store.DecideAll(ctx, reqs, res); err != nil {
			return err
		}
		j := 0
		for i := range checks {
			if checks[i].peekedTogether() {
				results[i] = res[j]
				j++
			}
		}
	}
	for i := range checks {
		if checks[i].Flags&Ban != 0 {
			results[i] = sluice.Result{}
		}
		results[i].Allowed = false
	}
	markExhausted(checks, results, false)
	return nil
}

// peekedTogether reports whether a blocked request's peek reads c in its
// one call: not a ban, a slot, nor a check on a store of its own.
func (c *Check) peekedTogether() bool { return c.Flags&Ban == 0 && c.Store == nil && !c.slot() }

func peekOf(req sluice.Request) sluice.Request {
	req.Cost = 0
	return req
}

// markExhausted flags the checks that could not admit their cost: a ban or a
// check over capacity with a cost; when the request was admitted (and its
// checks charged), one the store denied; otherwise (only peeked at, or part
// of a denied batch, which consumes nothing and reports each limit as it
// stands) one with less left than its cost.
func markExhausted(checks []Check, results []sluice.Result, admitted bool) {
	for i := range checks {
		c := &checks[i]
		cost := c.Request.Cost
		var exhausted bool
		switch {
		case cost == 0 || c.Flags&Failed != 0:
		case c.Flags&(Ban|OverCapacity) != 0:
			exhausted = true
		case admitted:
			exhausted = !results[i].Allowed
		default:
			exhausted = results[i].Remaining < cost
		}
		if exhausted {
			c.Flags |= Exhausted
		}
	}
}

// quotaGone reports whether none of the quota-mode checks (there is one at
// least) can admit its cost now, peeking at each as needed. A store error is
// no answer: the decision that follows meets it again.
func quotaGone(ctx context.Context, store sluice.Store, checks []Check) bool {
	for i := range checks {
		c := &checks[i]
		switch {
		case c.Flags&Quota == 0:
		case c.Request.Cost == 0:
			return false
		case c.Flags&(Ban|OverCapacity) != 0:
		default:
			r, err := decideOne(ctx, c.storeOf(store), c, peekOf(c.Request))
			if err != nil || r.Remaining >= c.Request.Cost {
				return false
			}
		}
	}
	return true
}

// quotaExhausted reports whether every quota-mode check is Exhausted.
func quotaExhausted(checks []Check) bool {
	for i := range checks {
		if f := checks[i].Flags; f&Quota != 0 && f&Exhausted == 0 {
			return false
		}
	}
	return true
}
