package engine

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// Charge records usage that already happened — the tokens of a response,
// the bytes sent — as the library's sluice.Charger does: each check's Cost
// is consumed even beyond its limit, and a key that used more than was left
// owes the excess until time repays it, so its next decisions are denied
// meanwhile. results[i] is checks[i]'s Result: Remaining is negative while
// the key owes units, RetryAfter is when one unit is admitted again.
//
// Each check is charged under the limit it is decided under (Resolve), on
// the store stack that decides it — a fair-share check under its key's share
// and its policy's total, counting toward the key's demand (shareCharges): the charges are not all or nothing, and
// shadow and quota-mode policies are charged like any other (what they
// count is what was used). An invalid check (no policy, a key or cost a
// charge cannot take, a concurrency policy, a (policy, key) named twice) is
// a *CheckError, counted nowhere; a store failure wraps ErrStore (and, when
// the fail policy is closed, a *failover.UnavailableError).
func (e *Engine) Charge(ctx context.Context, checks []Check, results []sluice.Result) error {
	if len(checks) != len(results) {
		panic("engine: a charge needs one result per check")
	}
	r := Request{Checks: checks, Results: results}
	e.resolve(&r)
	reqs := make([]sluice.Request, len(checks))
	for i := range checks {
		c := &checks[i]
		if c.Policy == nil {
			return &CheckError{Index: i, Err: fmt.Errorf("no policy")}
		}
		req, err := sluice.CheckCharge(sluice.Request{Policy: &c.Limit.Policy, Key: c.Key, Cost: c.Cost})
		if err != nil {
			return &CheckError{Index: i, Policy: c.Policy.Name, Err: err}
		}
		if fairKey(c) {
			return &CheckError{Index: i, Policy: c.Policy.Name, Err: fmt.Errorf("%w: the key %q holds the fair-share policy's total", sluice.ErrInvalidKey, TotalKey)}
		}
		if err := duplicateOf(checks, i); err != nil {
			return err
		}
		reqs[i] = req
	}
	reqs = e.shareCharges(checks, reqs)
	all := results
	if len(reqs) > len(checks) {
		all = make([]sluice.Result, len(reqs))
	}
	charger, ok := e.store.(sluice.Charger)
	if !ok {
		return fmt.Errorf("%w: %w (%T)", ErrStore, sluice.ErrNotChargeable, e.store)
	}
	var err error
	if len(reqs) == 1 {
		all[0], err = charger.Charge(ctx, reqs[0])
	} else {
		err = charger.ChargeAll(ctx, reqs, all)
	}
	if err == nil && len(all) > len(results) {
		mergeChargedTotals(checks, reqs, all, results)
	}
	if err != nil {
		e.storeFailed(ctx, err)
		err = fmt.Errorf("%w: %w", ErrStore, err)
		e.note(ctx, &r, err)
		return err
	}
	r.Allowed = true
	for i := range checks {
		e.obs.Charge(checks[i].Policy, reqs[i].Cost, results[i].Remaining < 0)
		r.Allowed = r.Allowed && results[i].Allowed
	}
	e.note(ctx, &r, nil)
	return nil
}
