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
//   - Debt checks count as envoyproxy/ratelimit does: a quota-mode one's
//     cost is charged even beyond its limit, also when the request is
//     denied for want of quota, and once the request is charged it is
//     exhausted when its key owes units; a peek is exhausted, and
//     an enforced one denies the request, only while its key owes units.
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
	// Debt: the check counts as envoyproxy/ratelimit counts, which adds
	// every cost to its counter and is over the limit only once the counter
	// is past it. A quota-mode check's cost is charged (recorded even beyond
	// the limit, sluice.Charger) and it is exhausted once the key owes
	// units; a peek (cost 0) is exhausted, and an enforced one denies, only
	// while the key owes units, not when it merely has none left.
	Debt
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

// batched reports whether c is decided in the enforced batch: a rated
// check, but for a Debt peek, which is read apart (owes).
func (c *Check) batched() bool { return c.rated() && !c.debtPeek() }

func (c *Check) debtPeek() bool { return c.Flags&Debt != 0 && c.Request.Cost == 0 }

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
	if !blocked && all&Debt != 0 {
		owing, err := owes(ctx, store, checks, results)
		if err != nil {
			return Outcome{}, err
		}
		blocked = owing
	}
	quotaBlocked := false
	if !blocked && all&Quota != 0 && quotaGone(ctx, store, checks) {
		blocked, quotaBlocked = true, true
	}
	if blocked {
		if err := peekAll(ctx, store, checks, results); err != nil {
			return Outcome{}, err
		}
		out := Outcome{Blocked: true}
		if all&Debt != 0 {
			out.ShadowErrors = settleDebts(ctx, store, checks, results, quotaBlocked)
		}
		return out, nil
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
		if checks[i].batched() {
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
		if checks[i].batched() {
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
		if !checks[i].batched() {
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
		var r sluice.Result
		var err error
		if c.Flags&Debt != 0 && (req.Cost == 0 || c.Flags&Quota != 0) {
			r, err = charge(ctx, c.storeOf(store), req)
		} else {
			r, err = decideOne(ctx, c.storeOf(store), c, req)
		}
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
