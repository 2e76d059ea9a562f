package engine

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/decide"
)

// TotalKey is the key a fair-share policy's total is counted under: the
// policy's limit over all its keys. No check of the policy may name it.
const TotalKey = "\xffsluice:total"

// shareChecks turns each fair-share check of r (checks[i] for r.Checks[i])
// into its key under its share (package share), and appends a check of the
// policy's total under the policy's own limit, decided with the others all
// or nothing: so no tenant passes its share and the total never passes the
// limit. It returns the checks and results to decide; the results have one
// more slot per total.
func (e *Engine) shareChecks(r *Request, checks []decide.Check) ([]decide.Check, []sluice.Result) {
	for i := range r.Checks {
		c := &r.Checks[i]
		if !shared(c) {
			continue
		}
		checks[i].Request.Policy = e.shares.Limit(&c.Limit.Policy, c.Policy.ShareInterval, c.Key, c.Cost, c.weight)
		checks = append(checks, decide.Check{Request: sluice.Request{Policy: &c.Limit.Policy, Key: TotalKey, Cost: c.Cost}, Flags: c.Flags})
	}
	results := make([]sluice.Result, len(checks))
	return checks, results
}

// mergeTotals writes each check's result into r.Results: a fair-share
// check's is its share's and its total's together — allowed when both are,
// the smaller remaining, the longer waits — and it is Exhausted (or Failed)
// when either is.
func mergeTotals(r *Request, checks []decide.Check, results []sluice.Result) {
	copy(r.Results, results)
	j := len(r.Checks)
	for i := range r.Checks {
		if !shared(&r.Checks[i]) {
			continue
		}
		mergeTotal(&r.Results[i], &results[j])
		checks[i].Flags |= checks[j].Flags & (decide.Exhausted | decide.Failed)
		j++
	}
}

// shared reports whether c is decided under its share and its policy's
// total: a fair-share check that reaches the store.
func shared(c *Check) bool {
	return c.Policy.FairShare && c.Flags&(decide.Ban|decide.OverCapacity) == 0
}

// fairWeight sets a fair-share check's weight from the limit it resolved
// to, and makes its limit the policy's own: for a fair-share policy, a key's
// override or plan does not limit it, it weighs it — by its rate over the
// policy's.
func fairWeight(c *Check) {
	if !c.Policy.FairShare || c.Limit == nil {
		return
	}
	c.weight = 1
	if c.Limit != c.Policy && c.Policy.Limit > 0 {
		c.weight = rateOf(&c.Limit.Policy) / rateOf(&c.Policy.Policy)
	}
	c.Limit = c.Policy
}

func rateOf(p *sluice.Policy) float64 { return float64(p.Limit) / float64(p.Period) }

// fairKey reports whether c names the key its fair-share policy's total is
// counted under.
func fairKey(c *Check) bool { return c.Policy.FairShare && c.Key == TotalKey }

// mergeTotal makes own, a fair-share key's result, its and its policy's
// total's together: allowed when both are, the smaller remaining, the
// longer waits.
func mergeTotal(own, total *sluice.Result) {
	own.Allowed = own.Allowed && total.Allowed
	own.Remaining = min(own.Remaining, total.Remaining)
	own.RetryAfter = max(own.RetryAfter, total.RetryAfter)
	own.ResetAfter = max(own.ResetAfter, total.ResetAfter)
	own.Delay = max(own.Delay, total.Delay)
	own.Degraded = own.Degraded || total.Degraded
}

// shareCharges makes each fair-share check's charge (reqs[i] for
// checks[i]) what its decisions are: its key under its share, the units
// counted as the key's demand, and the policy's total under the policy's
// own limit — one total per policy, charged the costs of all its checks. It
// returns reqs with the totals appended.
func (e *Engine) shareCharges(checks []Check, reqs []sluice.Request) []sluice.Request {
	n := len(checks)
	for i := range checks {
		c := &checks[i]
		if !c.Policy.FairShare {
			continue
		}
		reqs[i].Policy = e.shares.Limit(&c.Limit.Policy, c.Policy.ShareInterval, c.Key, reqs[i].Cost, c.weight)
		if j := totalOf(reqs[n:], c.Limit.Name); j >= 0 {
			reqs[n+j].Cost = min(reqs[n+j].Cost+reqs[i].Cost, sluice.MaxCharge)
		} else {
			reqs = append(reqs, sluice.Request{Policy: &c.Limit.Policy, Key: TotalKey, Cost: reqs[i].Cost})
		}
	}
	return reqs
}

// totalOf returns the index in totals of policy's total, or -1.
func totalOf(totals []sluice.Request, policy string) int {
	for j := range totals {
		if totals[j].Policy.Name == policy {
			return j
		}
	}
	return -1
}

// mergeChargedTotals writes each fair-share check's charge result into
// results, merged with its policy's total's (all[len(checks):]).
func mergeChargedTotals(checks []Check, reqs []sluice.Request, all, results []sluice.Result) {
	n := len(checks)
	copy(results, all[:n])
	for i := range checks {
		if checks[i].Policy.FairShare {
			mergeTotal(&results[i], &all[n+totalOf(reqs[n:], checks[i].Limit.Name)])
		}
	}
}
