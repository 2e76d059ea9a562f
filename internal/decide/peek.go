package decide

import (
	"context"

	"github.com/sluicehq/sluice"
)

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

// markExhausted flags the checks that could not admit their cost (a peek's
// is one unit, as the stores answer it): a ban or a check over capacity with
// a cost; when the request was admitted (and its
// checks charged), one the store denied; otherwise (only peeked at, or part
// of a denied batch, which consumes nothing and reports each limit as it
// stands) one with less left than its cost.
func markExhausted(checks []Check, results []sluice.Result, admitted bool) {
	for i := range checks {
		c := &checks[i]
		cost := c.Request.Cost
		var exhausted bool
		switch {
		case c.Flags&Failed != 0:
		case c.Flags&(Ban|OverCapacity) != 0:
			exhausted = cost > 0
		case c.Flags&Debt != 0 && (cost == 0 || admitted && c.Flags&Quota != 0):
			exhausted = results[i].Remaining < 0 // owes units
		case admitted:
			exhausted = !results[i].Allowed
		default:
			exhausted = results[i].Remaining < max(cost, 1) // a peek asks for one unit
		}
		if exhausted {
			c.Flags |= Exhausted
		}
	}
}
