package limitcore

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/decide"
)

// Core decides requests against a set of limits. Build one with New. It is
// safe for concurrent use.
type Core[R any] struct {
	*Settings[R]
	// Enforced are the limits that can deny; Shadowed are only reported.
	Enforced, Shadowed []Limit[R]

	formatPolicy func([]Quota) string
	reportShadow func(ctx context.Context, r R, q Quota, denied bool)
	// policyAll is the policy field when every enforced limit applies, the
	// usual case; it depends on nothing else, so it is built once. Empty
	// when a limit picks its limiter per request (Limit.Pick).
	policyAll string
	// charges: some limit has a Usage, charged when a request ends.
	charges bool
}

// New returns the core of the limits in s, which it keeps and completes
// (a default Logger). formatPolicy writes the RateLimit-Policy field of a
// set of quotas; reportShadow is called each time a shadow limit would have
// denied a request (denied: the enforced limits denied it anyway).
func New[R any](s *Settings[R], formatPolicy func([]Quota) string,
	reportShadow func(ctx context.Context, r R, q Quota, denied bool)) (*Core[R], error) {
	s.names = nil // only options need it
	if len(s.Limits) == 0 {
		return nil, fmt.Errorf("%s: %w", s.pkg, errNoLimits)
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	c := &Core[R]{Settings: s, formatPolicy: formatPolicy, reportShadow: reportShadow}
	for _, l := range s.Limits {
		if err := checkUsage(s.pkg, &l); err != nil {
			return nil, err
		}
		c.charges = c.charges || l.Usage != nil
		if l.Shadow || s.ShadowAll {
			c.Shadowed = append(c.Shadowed, l)
		} else {
			c.Enforced = append(c.Enforced, l)
		}
	}
	quotas := make([]Quota, len(c.Enforced))
	picks := false
	for i := range c.Enforced {
		quotas[i].Policy = &c.Enforced[i].Policy
		picks = picks || c.Enforced[i].Pick != nil
	}
	if !picks {
		c.policyAll = formatPolicy(quotas)
	}
	return c, nil
}

// Charges reports whether some limit charges a request's usage when it
// ends (Charge).
func (c *Core[R]) Charges() bool { return c.charges }

// Decision is what the limits decided for one request.
type Decision struct {
	// Quotas are the enforced limits that applied to the request (those with
	// a key for it), in the order of the limits, with what they reported.
	Quotas  []Quota
	Allowed bool
	// Violated, when denied, are the quotas that denied it: those without
	// room for the cost.
	Violated []Quota
	// RetryAfter, when denied, is when the request would be admitted, plus
	// any jitter: what the client is told to wait.
	RetryAfter time.Duration
	// Delay, when allowed, is how long the request waits before it goes on:
	// the longest leaky-bucket Delay, at most MaxDelay.
	Delay time.Duration

	// held are the checks of an admitted request that hold in-flight slots
	// (concurrency limits), on store; Release gives them back.
	held  []decide.Check
	store sluice.Store
}

// Holds reports whether the request holds in-flight slots, which Release
// must give back when it ends.
func (d *Decision) Holds() bool { return len(d.held) > 0 }

// Release gives back the in-flight slots the request holds, once; a slot
// whose release fails returns when its lease ends. The caller's context
// may have ended with the request (a client gone): the release is made
// anyway.
func (d *Decision) Release(ctx context.Context) error {
	held := d.held
	d.held = nil
	if len(held) == 0 {
		return nil
	}
	return decide.Release(context.WithoutCancel(ctx), d.store, held)
}

// Decide decides the limits that have a key for r with package decide: the
// enforced ones all or nothing, then the shadow ones each on its own. An
// error means the enforced limits could not be checked (a key function or
// the store failed, or the cost is invalid); shadow limits never cause one:
// their failures are logged.
func (c *Core[R]) Decide(ctx context.Context, r R, cost int64) (Decision, error) {
	checks := make([]decide.Check, 0, len(c.Enforced)+len(c.Shadowed))
	policies := make([]*sluice.Policy, 0, cap(checks))
	var store sluice.Store
	for i := range c.Enforced {
		l := &c.Enforced[i]
		key, err := c.keyFor(l, r)
		if err != nil {
			return Decision{}, err
		}
		if key == "" {
			continue
		}
		lim, pol, err := c.limiterFor(l, r)
		if err != nil {
			return Decision{}, err
		}
		req := sluice.Request{Policy: pol, Key: key, Cost: costOf(pol, cost)}
		if err := decide.CheckRequest(req); err != nil {
			return Decision{}, fmt.Errorf("check %d (policy %q): %w", len(checks), pol.Name, err)
		}
		if store == nil {
			store = lim.Store()
		} else if lim.Store() != store {
			return Decision{}, sluice.ErrStoreMismatch
		}
		checks = append(checks, decide.Check{Request: req})
		policies = append(policies, pol)
	}
	enforced := len(checks)
	for i := range c.Shadowed {
		l := &c.Shadowed[i]
		ch, ok := c.shadowCheck(ctx, l, r, cost)
		if !ok {
			continue
		}
		checks = append(checks, ch)
		policies = append(policies, ch.Request.Policy)
	}
	if len(checks) == 0 {
		return Decision{Allowed: true}, nil
	}
	if store == nil {
		store = checks[0].Store // only shadow checks: each on its limiter's store
	}
	results := make([]sluice.Result, len(checks))
	out, err := decide.Decide(ctx, store, checks, results, false)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Allowed: out.Allowed, Quotas: make([]Quota, enforced), store: store}
	for _, ch := range checks {
		if ch.Token != "" {
			d.held = append(d.held, ch)
		}
	}
	for i := range enforced {
		d.Quotas[i] = Quota{Policy: policies[i], Result: results[i]}
		if checks[i].Flags&decide.Exhausted != 0 {
			d.Violated = append(d.Violated, d.Quotas[i])
		}
	}
	for _, e := range out.ShadowErrors {
		c.Logger.WarnContext(ctx, c.pkg+": shadow limit failed", "policy", policies[e.Index].Name, "err", e.Err)
	}
	for i := enforced; i < len(checks); i++ {
		if checks[i].Flags&decide.Exhausted != 0 {
			c.reportShadow(ctx, r, Quota{Policy: policies[i], Result: results[i]}, !out.Allowed)
		}
	}
	if enforced == 0 {
		return Decision{Allowed: true, held: d.held, store: store}, nil
	}
	if !d.Allowed {
		// Every result of a denied batch carries the batch's RetryAfter.
		d.RetryAfter = d.Quotas[0].Result.RetryAfter
		if c.Jitter > 0 {
			d.RetryAfter += rand.N(c.Jitter)
		}
		return d, nil
	}
	for _, q := range d.Quotas {
		d.Delay = max(d.Delay, q.Result.Delay)
	}
	d.Delay = min(d.Delay, c.MaxDelay)
	return d, nil
}

// costOf is what a request of cost asks of pol: one slot of a concurrency
// limit, whatever the request's cost (0, a peek, too: a request that goes
// on holds a slot).
func costOf(pol *sluice.Policy, cost int64) int64 {
	if pol.Algorithm == sluice.Concurrency {
		return 1
	}
	return cost
}

// shadowCheck is the check of shadow limit l for r, decided on its
// limiter's store; ok is false when the limit does not apply to r or its
// check cannot be made, which is logged: a shadow limit must never change
// what the client sees. A cost over the limit's capacity is a check that
// would have denied.
func (c *Core[R]) shadowCheck(ctx context.Context, l *Limit[R], r R, cost int64) (decide.Check, bool) {
	key, err := c.keyFor(l, r)
	if err == nil && key == "" {
		return decide.Check{}, false
	}
	lim, pol := l.Limiter, &l.Policy
	if err == nil {
		lim, pol, err = c.limiterFor(l, r)
	}
	ch := decide.Check{Flags: decide.Shadow}
	if err == nil {
		ch.Request = sluice.Request{Policy: pol, Key: key, Cost: costOf(pol, cost)}
		ch.Store = lim.Store()
		if ch.Request.Cost > pol.Capacity() {
			ch.Flags |= decide.OverCapacity
		} else {
			err = decide.CheckRequest(ch.Request)
		}
	}
	if err != nil {
		c.Logger.WarnContext(ctx, c.pkg+": shadow limit failed", "policy", l.Policy.Name, "err", err)
		return decide.Check{}, false
	}
	return ch, true
}

// limiterFor returns the limiter r is decided by under l, and its policy:
// the one l.Pick picks, else l's own. A picked limiter must keep l's name
// and algorithm, or it would count on another state.
func (c *Core[R]) limiterFor(l *Limit[R], r R) (*sluice.Limiter, *sluice.Policy, error) {
	if l.Pick == nil {
		return l.Limiter, &l.Policy, nil
	}
	lim := l.Pick(r)
	if lim == nil || lim == l.Limiter {
		return l.Limiter, &l.Policy, nil
	}
	p := lim.Policy()
	if p.Name != l.Policy.Name || p.Algorithm != l.Policy.Algorithm {
		return nil, nil, fmt.Errorf("%s: limit %q picked a limiter of policy %q (%s): a plan keeps its policy's name and algorithm",
			c.pkg, l.Policy.Name, p.Name, p.Algorithm)
	}
	return lim, &p, nil
}

// keyFor returns the store key of r under l, or "" when the limit does not
// apply to it.
func (c *Core[R]) keyFor(l *Limit[R], r R) (string, error) {
	k, err := StoreKey(l.Key, l.Fallback, r)
	if ke, ok := err.(*KeyError); ok {
		return "", fmt.Errorf("%s: %s of limit %q: %w", c.pkg, ke.Which, l.Policy.Name, ke.Err)
	}
	return k, nil
}

// Release gives back the in-flight slots of d's request, which has ended
// (its handler returned or panicked, or its client went away); a failure is
// logged: those slots return when their lease ends.
func (c *Core[R]) Release(ctx context.Context, d *Decision) {
	if err := d.Release(ctx); err != nil {
		c.Logger.WarnContext(ctx, c.pkg+": releasing in-flight slots failed; they return when their lease ends", "err", err)
	}
}

// PolicyField returns the RateLimit-Policy value of quotas, a decision's.
func (c *Core[R]) PolicyField(quotas []Quota) string {
	if len(quotas) == len(c.Enforced) && c.policyAll != "" {
		return c.policyAll
	}
	return c.formatPolicy(quotas)
}

// Wait holds the caller for d, or until ctx ends, in which case it returns
// the context's error.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
