package decide

// Quota mode and debts: checks that count whatever the answer, and keys
// that owe units after a charge.

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// quotaGone reports whether none of the quota-mode checks (there is one at
// least) can admit its cost now, peeking at each as needed. A store error is
// no answer: the decision that follows meets it again.
func quotaGone(ctx context.Context, store sluice.Store, checks []Check) bool {
	for i := range checks {
		c := &checks[i]
		switch {
		case c.Flags&Quota == 0:
		case c.debtPeek():
			r, err := charge(ctx, c.storeOf(store), c.Request)
			if err != nil || r.Remaining >= 0 {
				return false
			}
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

// owes reads the enforced Debt peeks, which the enforced batch leaves out,
// writing their results: one is allowed unless its key owes units, and
// owes reports whether any does (the request is then denied).
func owes(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result) (bool, error) {
	owing := false
	for i := range checks {
		c := &checks[i]
		if !c.rated() || !c.debtPeek() {
			continue
		}
		r, err := charge(ctx, store, c.Request)
		if err != nil {
			return false, err
		}
		r.Allowed = r.Remaining >= 0
		results[i] = r
		owing = owing || !r.Allowed
	}
	return owing, nil
}

// charge records req on store, which must be a sluice.Charger.
func charge(ctx context.Context, store sluice.Store, req sluice.Request) (sluice.Result, error) {
	c, ok := store.(sluice.Charger)
	if !ok {
		return sluice.Result{}, fmt.Errorf("%w (%T)", sluice.ErrNotChargeable, store)
	}
	req, err := sluice.CheckCharge(req)
	if err != nil {
		return sluice.Result{}, err
	}
	return c.Charge(ctx, req)
}

// settleDebts completes a blocked request's Debt checks, which peekAll read
// as decisions report them (never owing): when the request was denied for
// want of quota its quota-mode checks are charged (envoyproxy/ratelimit
// counts them whatever the answer), and its peeks are read as charges of
// nothing, which say what a key owes. Their results stay denials; which are
// exhausted is then said again.
func settleDebts(ctx context.Context, store sluice.Store, checks []Check, results []sluice.Result, quotaBlocked bool) []ShadowError {
	var errs []ShadowError
	for i := range checks {
		c := &checks[i]
		switch {
		case c.Flags&(Ban|OverCapacity) != 0:
			continue
		case c.Request.Cost == 0:
		case !quotaBlocked || c.Flags&Quota == 0:
			continue
		}
		r, err := charge(ctx, c.storeOf(store), c.Request)
		if err != nil {
			errs = append(errs, ShadowError{Index: i, Err: err})
			continue
		}
		r.Allowed = false
		results[i] = r
	}
	for i := range checks {
		checks[i].Flags &^= Exhausted
	}
	markExhausted(checks, results, false)
	return errs
}
