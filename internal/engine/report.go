package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/decide"
	"github.com/sluicehq/sluice/internal/tracing"
)

// report applies the fail policy's answer to a store failure err, reports
// the decided request r to the observer and returns the error the caller
// gets: err wrapped in ErrStore, or nil.
//
// Each check counts under its configured policy (observe.Observer.Decision),
// but a shadow check the store failed, which decided nothing. A request
// denied because the fail policy is closed counts every check as denied,
// and its results say so; a store failure no fail policy answered counts
// nothing but the failure.
func (e *Engine) report(ctx context.Context, r *Request, out decide.Outcome, err error) error {
	if err != nil {
		e.failed(ctx, r, err)
		err = fmt.Errorf("%w: %w", ErrStore, err)
		e.note(ctx, r, err)
		return err
	}
	degraded := false
	for i := range r.Checks {
		c := &r.Checks[i]
		if c.Flags&decide.Failed == 0 {
			e.obs.Decision(c.Policy, r.Allowed, r.Results[i].Allowed)
		}
		degraded = degraded || r.Results[i].Degraded
	}
	if degraded {
		e.obs.Degraded(e.failMode)
	}
	for _, se := range out.ShadowErrors {
		e.storeFailed(ctx, se.Err)
	}
	e.note(ctx, r, nil)
	return nil
}

// failed reports a decision the store failed: denied, each check, when the
// fail policy is closed, its results saying so; else only the failure.
func (e *Engine) failed(ctx context.Context, r *Request, err error) {
	var unavailable *failover.UnavailableError
	if !errors.As(err, &unavailable) {
		e.storeFailed(ctx, err)
		return
	}
	e.obs.Degraded(failover.FailClosed.String())
	for i := range r.Checks {
		c := &r.Checks[i]
		r.Results[i] = sluice.Result{Limit: c.Limit.Limit, RetryAfter: unavailable.RetryAfter, Degraded: true}
		e.obs.Decision(c.Policy, false, false)
	}
}

// storeFailed counts and logs a failed store call, unless a fail policy
// counted it already or the caller gave up on it.
func (e *Engine) storeFailed(ctx context.Context, err error) {
	if !e.failover && ctx.Err() == nil {
		e.obs.StoreFailed(err, e.failMode)
	}
}

// note records r's decision on ctx's span.
func (e *Engine) note(ctx context.Context, r *Request, err error) {
	if !e.obs.Tracing(ctx) {
		return
	}
	d := tracing.Decision{Policies: make([]string, len(r.Checks)), Allowed: r.Allowed, Err: err}
	if e.obs.TracesKeys() {
		d.Keys = make([]string, len(r.Checks))
	}
	for i := range r.Checks {
		c := &r.Checks[i]
		if c.Policy != nil {
			d.Policies[i] = c.Policy.Name
		}
		if d.Keys != nil {
			d.Keys[i] = c.Key
		}
		if err == nil {
			d.Shadow = d.Shadow || (c.Policy.Shadow && !r.Results[i].Allowed)
			if r.Results[i].Degraded {
				d.FailPolicy = e.failMode
			}
		}
	}
	if errors.Is(err, failover.ErrUnavailable) {
		d.FailPolicy = failover.FailClosed.String()
	}
	e.obs.Note(ctx, d)
}
