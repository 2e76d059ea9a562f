package limitcore

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
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

// Decision is what the limits decided for one request.
type Decision struct {
	// Quotas are the enforced limits that applied to the request (those with
	// a key for it), in the order of the limits, with what they reported.
	Quotas  []Quota
	Allowed bool
	// RetryAfter, when denied, is when the request would be admitted, plus
	// any jitter: what the client is told to wait.
	RetryAfter time.Duration
	// Delay, when allowed, is how long the request waits before it goes on:
	// the longest leaky-bucket Delay, at most MaxDelay.
	Delay time.Duration
}

// Decide checks the enforced limits that have a key for r, all or nothing,
// then the shadow limits each on its own. An error means the enforced limits
// could not be checked (a key function or the store failed, or the cost is
// invalid); shadow limits never cause one.
func (c *Core[R]) Decide(ctx context.Context, r R, cost int64) (Decision, error) {
	quotas, allowed, err := c.decideEnforced(ctx, r, cost)
	if err != nil {
		return Decision{}, err
	}
	if len(c.Shadowed) > 0 {
		c.decideShadow(ctx, r, cost, allowed)
	}
	d := Decision{Quotas: quotas, Allowed: allowed}
	if !allowed {
		// Every result of a denied batch carries the batch's RetryAfter.
		d.RetryAfter = quotas[0].Result.RetryAfter
		if c.Jitter > 0 {
			d.RetryAfter += rand.N(c.Jitter)
		}
		return d, nil
	}
	for _, q := range quotas {
		d.Delay = max(d.Delay, q.Result.Delay)
	}
	d.Delay = min(d.Delay, c.MaxDelay)
	return d, nil
}

func (c *Core[R]) decideEnforced(ctx context.Context, r R, cost int64) ([]Quota, bool, error) {
	checks := make([]sluice.Check, 0, len(c.Enforced))
	quotas := make([]Quota, 0, len(c.Enforced))
	for i := range c.Enforced {
		l := &c.Enforced[i]
		key, err := c.keyFor(l, r)
		if err != nil {
			return nil, false, err
		}
		if key == "" {
			continue
		}
		lim, pol, err := c.limiterFor(l, r)
		if err != nil {
			return nil, false, err
		}
		checks = append(checks, sluice.Check{Limiter: lim, Key: key, Cost: cost, Peek: cost == 0})
		quotas = append(quotas, Quota{Policy: pol})
	}
	if len(checks) == 0 {
		return nil, true, nil
	}
	results, err := sluice.AllowAll(ctx, checks...)
	if err != nil {
		return nil, false, err
	}
	for i := range results {
		quotas[i].Result = results[i]
	}
	return quotas, results[0].Allowed, nil
}

// decideShadow decides each shadow limit on its own, so that none of them
// can deny the request or keep another from counting it: charged when the
// request was admitted, peeked at otherwise (a denied request consumes
// nothing). A failure is logged and otherwise ignored, since shadow limits
// must never change what the client sees.
func (c *Core[R]) decideShadow(ctx context.Context, r R, cost int64, admitted bool) {
	n := cost
	if !admitted {
		n = 0
	}
	for i := range c.Shadowed {
		l := &c.Shadowed[i]
		key, err := c.keyFor(l, r)
		if err == nil && key == "" {
			continue
		}
		var res sluice.Result
		lim, pol := l.Limiter, &l.Policy
		if err == nil {
			lim, pol, err = c.limiterFor(l, r)
		}
		if err == nil {
			res, err = lim.AllowN(ctx, key, n)
		}
		if err != nil {
			c.Logger.WarnContext(ctx, c.pkg+": shadow limit failed", "policy", l.Policy.Name, "err", err)
			continue
		}
		switch {
		case admitted && !res.Allowed:
			c.reportShadow(ctx, r, Quota{Policy: pol, Result: res}, false)
		case !admitted && res.Remaining < max(cost, 1): // cost 0 asks for one unit, as a peek does
			// The peek's RetryAfter is one unit's, not the request's: unknown.
			res.Allowed, res.RetryAfter = false, 0
			c.reportShadow(ctx, r, Quota{Policy: pol, Result: res}, true)
		}
	}
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
	k, err := l.Key(r)
	if err != nil {
		return "", fmt.Errorf("%s: key of limit %q: %w", c.pkg, l.Policy.Name, err)
	}
	if l.Fallback == nil {
		return FitKey(k), nil
	}
	// Distinct prefixes keep the two key spaces apart.
	if k != "" {
		return FitKey("key:" + k), nil
	}
	if k, err = l.Fallback(r); err != nil {
		return "", fmt.Errorf("%s: fallback key of limit %q: %w", c.pkg, l.Policy.Name, err)
	}
	if k == "" {
		return "", nil
	}
	return FitKey("fallback:" + k), nil
}

// PolicyField returns the RateLimit-Policy value of quotas, a decision's.
func (c *Core[R]) PolicyField(quotas []Quota) string {
	if len(quotas) == len(c.Enforced) && c.policyAll != "" {
		return c.policyAll
	}
	return c.formatPolicy(quotas)
}

// Violated returns the quotas of a denied decision that denied it: those
// without room for the cost.
func Violated(quotas []Quota, cost int64) []Quota {
	var out []Quota
	for _, q := range quotas {
		if q.Result.Remaining < cost {
			out = append(out, q)
		}
	}
	return out
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
