// Package engine decides a request for every front end of a Sluice server —
// Envoy's rate limit service (package envoyrls), the HTTP API (httpapi), the
// reverse proxy and the forward-auth endpoint (proxy) — in three steps:
//
//  1. resolve: each check's policy as configured (files merged with xDS, by
//     package service) becomes the policy applied, under its key's runtime
//     override or its plan, and gets its flags — shadow, ban, over capacity,
//     quota mode — by the front end's contract (Request);
//  2. decide: package decide applies the rules (all or nothing across the
//     enforced checks, shadow checks apart, bans, costs over capacity, quota
//     mode) on the store stack, and the engine applies the fail policy's
//     answer when the store cannot decide;
//  3. report: one Observer (package observe) counts the decision in the
//     metrics, times it, and notes it on the request's span.
//
// A front end only translates its protocol into a Request and the Request's
// outcome back: a decision is made in one place and observed in one place.
package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decide"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/share"
	"github.com/sluicehq/sluice/internal/storestack"
)

// Engine decides requests on a store stack. It is safe for concurrent use.
type Engine struct {
	store     sluice.Store // the stack's Decider
	failMode  string       // the fail policy under it, "none" without one
	failover  bool         // the stack has a fail policy, which counts its own store errors
	obs       *observe.Observer
	overrides *overrides.Store // nil: none
	shares    *share.Sharer    // the fair-share policies' shares
}

// Option configures an Engine.
type Option func(*[]share.Option)

// WithClock sets the clock fair-share policies time their keys' demand by
// (default: the system's).
func WithClock(c sluice.Clock) Option {
	return func(o *[]share.Option) { *o = append(*o, share.WithClock(c)) }
}

// WithNode names the engine's node on the fair-share policies' demand
// boards (default: random). Nodes sharing a store need distinct names.
func WithNode(id string) Option {
	return func(o *[]share.Option) { *o = append(*o, share.WithNode(id)) }
}

// New returns an Engine deciding on st, reporting to obs, applying the
// runtime overrides of ov (nil: none).
func New(st *storestack.Stack, obs *observe.Observer, ov *overrides.Store, opts ...Option) *Engine {
	e := &Engine{store: st.Decider(), failMode: st.FailMode(), failover: st.Failover != nil, obs: obs, overrides: ov}
	sopts := []share.Option{share.WithErrorHandler(func(err error) { e.storeFailed(context.Background(), err) })}
	for _, o := range opts {
		o(&sopts)
	}
	e.shares = share.New(st.Board, sopts...)
	return e
}

// Shares returns the fair-share policies' shares.
func (e *Engine) Shares() *share.Sharer { return e.shares }

// Check is one (policy, key, cost) of a request.
type Check struct {
	// Policy is the policy as configured; metrics count by it.
	Policy *config.Policy
	Key    string
	// Cost is the units asked; 0 is a peek.
	Cost int64
	// Plan names the plan the key is on, for a policy with plans.
	Plan string
	// Limit is the policy the check is decided under, set by Resolve: a
	// copy of Policy under its override's or plan's limit, or Policy
	// itself. Nil: Decide resolves it.
	Limit *config.Policy
	// Flags say how the check applies (set by Decide from the policy and
	// the Request) and, after Decide, whether it was Exhausted.
	Flags decide.Flags
	// Token, set by Decide, releases the in-flight slot a check of a
	// concurrency policy holds for an admitted request (Release); "" for
	// every other check.
	Token string
	// weight is the key's weight under a fair-share policy, set with Limit.
	weight float64
}

// Applied returns the policy c is decided under: Limit once resolved, else
// Policy.
func (c *Check) Applied() *config.Policy {
	if c.Limit != nil {
		return c.Limit
	}
	return c.Policy
}

// Request is one request to decide: its checks and the contract of the
// front end asking.
type Request struct {
	Checks []Check
	// Results receives each check's Result; len(Results) == len(Checks).
	Results []sluice.Result

	// DenyOverCapacity: a cost above its limit's capacity denies the
	// request (Envoy: an error could be let through by an Envoy failing
	// open), and a shadow check's is only peeked at. Otherwise it is a
	// *CheckError wrapping sluice.ErrExceedsCapacity.
	DenyOverCapacity bool
	// QuotaMode: quota-mode policies are soft limits that deny the request
	// when all of them are exhausted (envoyproxy/ratelimit's quota_mode).
	// Otherwise they are shadow policies.
	QuotaMode bool
	// Debt: the checks count as envoyproxy/ratelimit counts (decide.Debt):
	// a quota-mode check's cost is charged even beyond its limit, and a
	// peek is over the limit only while its key owes units.
	Debt bool
	// Refused: the front end denies the request whatever its checks say
	// (a descriptor too large to decide); every check is only peeked at.
	Refused bool

	// The outcome, set by Decide.
	Allowed bool
	// Blocked: denied before anything was charged (a ban, a cost over
	// capacity, no quota left, Refused).
	Blocked bool
	// QuotaDenied: denied for want of quota after the enforced checks
	// admitted it and were charged.
	QuotaDenied bool
}

// CheckError reports which check of a decision is invalid. It wraps the
// sluice error (ErrInvalidKey, ErrInvalidCost, ErrExceedsCapacity,
// ErrDuplicateCheck), so callers can tell a client's mistake from a store
// failure with errors.Is.
type CheckError struct {
	Index  int
	Policy string
	Err    error
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("check %d (policy %q): %v", e.Index, e.Policy, e.Err)
}

func (e *CheckError) Unwrap() error { return e.Err }

// ErrStore wraps every store failure Decide returns.
var ErrStore = errors.New("store failure")

// Decide decides checks all or nothing and reports whether the request they
// describe is allowed; results[i] is checks[i]'s Result. It is DecideRequest
// of a Request with the HTTP API's contract.
//
// Enforced policies are decided together, atomically: when any denies,
// nothing is consumed and every enforced result is denied with the batch's
// RetryAfter. Shadow policies never deny the request: when the enforced ones
// admit it, each shadow policy is decided on its own (charged if it admits,
// its result Allowed false if it would have denied); when the request is
// denied they are only peeked at, so they are charged for nothing that did not
// pass. An invalid check is a *CheckError; a store failure wraps ErrStore.
func (e *Engine) Decide(ctx context.Context, checks []Check, results []sluice.Result) (bool, error) {
	r := Request{Checks: checks, Results: results}
	err := e.DecideRequest(ctx, &r)
	return r.Allowed, err
}

// DecideRequest resolves, decides and reports r, and sets its outcome. An
// invalid check is a *CheckError, counted nowhere; a store failure wraps
// ErrStore, and when the fail policy is closed also a
// *failover.UnavailableError, with every result a degraded denial.
func (e *Engine) DecideRequest(ctx context.Context, r *Request) error {
	if len(r.Checks) != len(r.Results) {
		panic("engine: a Request needs one result per check")
	}
	r.Allowed, r.Blocked, r.QuotaDenied = false, false, false
	e.resolve(r)
	if err := validate(r.Checks); err != nil {
		e.note(ctx, r, err)
		return err
	}
	start := time.Now()
	out, err := e.decide(ctx, r)
	e.obs.Took(time.Since(start))
	if err == nil {
		r.Allowed, r.Blocked, r.QuotaDenied = out.Allowed, out.Blocked, out.QuotaDenied
	}
	err = e.report(ctx, r, out, err)
	return err
}

// inline is how many checks a decision handles without allocating: Envoy's
// requests have a few descriptors, the HTTP API's usually one check.
const inline = 8

// decide runs package decide on r's checks. A fair-share check becomes two
// (fairshare.go): its key under its share, and the policy's total.
func (e *Engine) decide(ctx context.Context, r *Request) (decide.Outcome, error) {
	var buf [inline]decide.Check
	checks := buf[:0]
	if len(r.Checks) > inline {
		checks = make([]decide.Check, 0, len(r.Checks))
	}
	fair := false
	for i := range r.Checks {
		c := &r.Checks[i]
		checks = append(checks, decide.Check{Request: sluice.Request{Policy: &c.Limit.Policy, Key: c.Key, Cost: c.Cost}, Flags: c.Flags})
		fair = fair || c.Policy.FairShare
	}
	results := r.Results
	if fair {
		checks, results = e.shareChecks(r, checks)
	}
	out, err := decide.Decide(ctx, e.store, checks, results, r.Refused)
	if fair && err == nil {
		mergeTotals(r, checks, results)
	}
	for i := range r.Checks {
		r.Checks[i].Flags, r.Checks[i].Token = checks[i].Flags, checks[i].Token
	}
	return out, err
}
