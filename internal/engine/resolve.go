package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decide"
	"github.com/sluicehq/sluice/internal/overrides"
)

// Resolve sets each check's Limit to the policy it is decided under: its
// override's (of its key or a prefix of it), else its plan's, else its
// policy's own. Decide then decides under exactly those limits, so a front
// end that reports them (current_limit, RateLimit-Policy) reports what was
// applied even when an override changes meanwhile. Decide resolves the
// checks left unresolved itself.
func (e *Engine) Resolve(checks []Check) {
	set, now := e.overrideSet(), time.Time{}
	for i := range checks {
		c := &checks[i]
		if c.Limit = c.Policy; c.Policy == nil {
			continue
		}
		if l := e.limitOf(c, set, &now); l != nil {
			c.Limit = l
		}
		fairWeight(c)
	}
}

// resolve completes r's checks for deciding: the Limit of those not
// resolved yet, and every check's flags, by r's contract.
func (e *Engine) resolve(r *Request) {
	var set *overrides.Set
	var now time.Time
	looked := false
	for i := range r.Checks {
		c := &r.Checks[i]
		if c.Policy == nil {
			continue // validate says so
		}
		if c.Limit == nil {
			if !looked {
				set, looked = e.overrideSet(), true
			}
			if c.Limit = e.limitOf(c, set, &now); c.Limit == nil {
				c.Limit = c.Policy
			}
			fairWeight(c)
		}
		c.Flags = flagsOf(c, r)
	}
}

// flagsOf says how c applies under r's contract.
func flagsOf(c *Check, r *Request) decide.Flags {
	var f decide.Flags
	if c.Policy.Shadow {
		f |= decide.Shadow
	}
	if c.Policy.QuotaMode && r.QuotaMode {
		f |= decide.Quota
	}
	if r.Debt {
		f |= decide.Debt
	}
	switch {
	case c.Limit.DeniesAll():
		f |= decide.Ban
	case r.DenyOverCapacity && c.Cost > c.Limit.Capacity():
		f |= decide.OverCapacity
	}
	return f
}

// overrideSet returns the overrides in force, nil without an override store.
func (e *Engine) overrideSet() *overrides.Set {
	if e.overrides == nil {
		return nil
	}
	return e.overrides.Snapshot()
}

// limitOf returns a copy of c's policy under the limit of c's override, else
// of its plan; nil when neither applies. *now is read from the override
// store once, when first needed.
func (e *Engine) limitOf(c *Check, set *overrides.Set, now *time.Time) *config.Policy {
	if c.Policy.DeniesAll() {
		return nil
	}
	var limit *sluice.Policy
	if set.Has(c.Policy.Name) {
		if now.IsZero() {
			*now = e.overrides.Now()
		}
		if o := set.Lookup(c.Policy.Name, c.Key, *now); o != nil {
			sp := o.Apply(c.Policy.Policy)
			if sp.Validate() == nil { // else the policy changed algorithm since: the override is moot
				limit = &sp
			}
		}
	}
	if limit == nil && c.Policy.Plans != nil {
		sp := c.Policy.ForPlan(c.Plan)
		limit = &sp
	}
	if limit == nil {
		return nil
	}
	p := *c.Policy
	p.Policy = *limit
	return &p
}

// validate reports the first invalid check: no policy, a key or cost its
// limit cannot decide, or a (policy, key) another check names too. A ban's
// or an over-capacity check's cost is no error (it denies): only its key is
// checked.
func validate(checks []Check) error {
	for i := range checks {
		c := &checks[i]
		if c.Policy == nil {
			return &CheckError{Index: i, Err: errors.New("no policy")}
		}
		req := sluice.Request{Policy: &c.Limit.Policy, Key: c.Key, Cost: c.Cost}
		if c.Flags&(decide.Ban|decide.OverCapacity) != 0 {
			req.Cost = 0
		}
		if err := decide.CheckRequest(req); err != nil {
			return &CheckError{Index: i, Policy: c.Policy.Name, Err: err}
		}
		if fairKey(c) {
			return &CheckError{Index: i, Policy: c.Policy.Name, Err: fmt.Errorf("%w: the key %q holds the fair-share policy's total", sluice.ErrInvalidKey, TotalKey)}
		}
		if err := duplicateOf(checks, i); err != nil {
			return err
		}
	}
	return nil
}

// duplicateOf reports checks[i] naming the (policy, key) of an earlier
// check: a *CheckError wrapping sluice.ErrDuplicateCheck.
func duplicateOf(checks []Check, i int) error {
	c := &checks[i]
	for j := range i {
		if checks[j].Policy.Name == c.Policy.Name && checks[j].Key == c.Key {
			return &CheckError{Index: i, Policy: c.Policy.Name,
				Err: fmt.Errorf("%w: checks %d and %d name the same key; add their costs into one check", sluice.ErrDuplicateCheck, j, i)}
		}
	}
	return nil
}
