// Package service is the core of `sluice serve`: it holds the configuration in
// force and the store, decides checks against them, counts every decision in
// Prometheus metrics, and swaps in a new configuration on reload without
// touching the counters in the store. The HTTP API (package httpapi) and the
// Envoy rate limit API (package envoyrls) are two front ends over one Service,
// so both decide exactly alike.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/tracing"
)

// Service decides checks against the configuration in force. It is safe for
// concurrent use.
type Service struct {
	store   sluice.Store
	decider sluice.Store    // store, traced when tracing is on
	tracer  *tracing.Tracer // nil: off
	current atomic.Pointer[snapshot]
	metrics *metrics
	log     *slog.Logger
	errLog  errorLog

	// configMu orders configuration changes: files (the files'
	// configuration) and dynamic (the xDS one, nil without) are what the
	// configuration in force is merged from (see ApplyDynamic).
	configMu sync.Mutex
	files    *config.Config
	dynamic  *config.Config

	overrides *overrides.Store // nil: none
	modes     config.Modes     // applied to every configuration put in force
}

// snapshot is one configuration with what the hot path derives from it.
type snapshot struct {
	cfg *config.Config
	// counters holds each policy's decision counters (*config.Policy →
	// *decisionCounters), resolved at its first decision: a configuration of
	// many policies costs nothing to install and adds no series to /metrics
	// for policies that decide nothing.
	counters sync.Map
}

// Option configures a Service.
type Option func(*options)

type options struct {
	log       *slog.Logger
	version   string
	tracer    *tracing.Tracer
	overrides *overrides.Store
	modes     config.Modes
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithVersion sets the version reported by sluice_build_info.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithModes applies envoyproxy/ratelimit's global switches (SHADOW_MODE,
// QUOTA_MODE) to every configuration the Service puts in force: the first,
// each reload's and each from xDS (see config.Config.WithModes).
func WithModes(m config.Modes) Option { return func(o *options) { o.modes = m } }

// New returns a Service deciding on store with cfg in force.
func New(store sluice.Store, cfg *config.Config, opts ...Option) *Service {
	o := options{log: slog.Default(), version: "devel"}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Service{store: store, decider: o.tracer.WrapStore(store), tracer: o.tracer, metrics: newMetrics(o.version), log: o.log, overrides: o.overrides, modes: o.modes}
	if o.overrides != nil {
		s.metrics.registry.MustRegister(o.overrides.Collectors()...)
	}
	if fs := failoverStore(store); fs != nil {
		s.watchFailover(fs)
	}
	s.files = cfg
	s.install(cfg)
	s.metrics.registry.MustRegister(newStoreCollector(s))
	return s
}

// Config returns the configuration in force.
func (s *Service) Config() *config.Config { return s.current.Load().cfg }

// Store returns the store the Service decides on.
func (s *Service) Store() sluice.Store { return s.store }

// Registry returns the Prometheus registry holding the Service's metrics.
func (s *Service) Registry() *prometheus.Registry { return s.metrics.registry }

// Logger returns the Service's logger.
func (s *Service) Logger() *slog.Logger { return s.log }

// install puts cfg in force: every configuration, from New, Reload and
// ApplyDynamic, is finalised here.
func (s *Service) install(cfg *config.Config) {
	cfg = cfg.WithModes(s.modes)
	snap := &snapshot{cfg: cfg}
	if ls := leaseStore(s.store); ls != nil {
		ls.SetPolicies(leaseSettings(cfg))
	}
	s.current.Store(snap)
}

// Check is one (policy, key, cost) of a decision.
type Check struct {
	Policy *config.Policy
	Key    string
	Cost   int64
	// Plan names the plan the key is on, for a policy with plans.
	Plan string
	// Limit is the policy the check is decided under, set by Resolve: a
	// copy of Policy under its override's or plan's limit, or Policy itself.
	// Nil: Decide resolves it. Metrics always count by Policy.
	Limit *config.Policy
}

// Applied returns the policy c is decided under: Limit once resolved, else
// Policy.
func (c Check) Applied() *config.Policy {
	if c.Limit != nil {
		return c.Limit
	}
	return c.Policy
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
// describe is allowed; results[i] is checks[i]'s Result, and len(results) must
// be len(checks).
//
// Enforced policies are decided together, atomically: when any denies,
// nothing is consumed and every enforced result is denied with the batch's
// RetryAfter. Shadow policies never deny the request: when the enforced ones
// admit it, each shadow policy is decided on its own (charged if it admits,
// its result Allowed false if it would have denied); when the request is
// denied they are only peeked at, so they are charged for nothing that did not
// pass. An invalid check is a *CheckError; a store failure wraps ErrStore.
func (s *Service) Decide(ctx context.Context, checks []Check, results []sluice.Result) (bool, error) {
	allowed, err := s.decideCounted(ctx, checks, results)
	if s.tracer != nil {
		s.noteDecision(ctx, checks, results, allowed, err)
	}
	return allowed, err
}

// decideCounted is Decide but for tracing: it decides and counts the
// decision in the metrics.
func (s *Service) decideCounted(ctx context.Context, checks []Check, results []sluice.Result) (bool, error) {
	if len(checks) != len(results) {
		panic("service: Decide needs one result per check")
	}
	counted := checks // metrics count by the configured policy
	checks = s.applyOverrides(checks)
	if err := validate(checks); err != nil {
		return false, err
	}
	snap := s.current.Load()
	start := time.Now()
	allowed, err := s.decide(ctx, checks, results)
	s.metrics.duration.Observe(time.Since(start).Seconds())
	var unavailable *failover.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		// Failing closed: the request is denied, and says why.
		s.metrics.degraded.WithLabelValues(failover.FailClosed.String()).Inc()
		for i, c := range checks {
			results[i] = sluice.Result{Limit: c.Policy.Limit, RetryAfter: unavailable.RetryAfter, Degraded: true}
			snap.count(counted[i].Policy, s.metrics, false, false)
		}
		return false, fmt.Errorf("%w: %w", ErrStore, err)
	case err != nil:
		if failoverStore(s.store) == nil && ctx.Err() == nil {
			s.storeFailed(err, "none") // a fail-over Store counts its own
		}
		return false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	degraded := false
	for i, c := range counted {
		snap.count(c.Policy, s.metrics, allowed, results[i].Allowed)
		degraded = degraded || results[i].Degraded
	}
	if degraded {
		s.metrics.degraded.WithLabelValues(s.failMode()).Inc()
	}
	return allowed, nil
}

// failMode names the fail policy in force, for metrics.
func (s *Service) failMode() string {
	if fs := failoverStore(s.store); fs != nil {
		return fs.Mode().String()
	}
	return "none"
}

func validate(checks []Check) error {
	for i, c := range checks {
		if c.Policy == nil {
			return &CheckError{Index: i, Err: errors.New("no policy")}
		}
		req := sluice.Request{Policy: &c.Policy.Policy, Key: c.Key, Cost: c.Cost}
		if c.Policy.DeniesAll() {
			req.Cost = 0 // any cost is denied, not an error: only the key is checked
		}
		if err := sluice.CheckRequest(req); err != nil {
			return &CheckError{Index: i, Policy: c.Policy.Name, Err: err}
		}
		for j := range i {
			if checks[j].Policy.Name == c.Policy.Name && checks[j].Key == c.Key {
				return &CheckError{Index: i, Policy: c.Policy.Name,
					Err: fmt.Errorf("%w: checks %d and %d name the same key; add their costs into one check", sluice.ErrDuplicateCheck, j, i)}
			}
		}
	}
	return nil
}

func (s *Service) decide(ctx context.Context, checks []Check, results []sluice.Result) (bool, error) {
	shadows, bans, banned := 0, false, false
	for _, c := range checks {
		if c.Policy.Shadow {
			shadows++
		}
		if c.Policy.DeniesAll() {
			bans = true
			banned = banned || (c.Cost > 0 && !c.Policy.Shadow)
		}
	}
	if bans {
		return s.decideBanned(ctx, checks, results, banned)
	}
	if shadows == 0 {
		return s.decideAll(ctx, checks, results)
	}
	// Split into enforced and shadow checks; results are written back in place.
	idx := make([]int, 0, len(checks))
	for i, c := range checks {
		if !c.Policy.Shadow {
			idx = append(idx, i)
		}
	}
	allowed := true
	if len(idx) > 0 {
		enforced := make([]Check, len(idx))
		res := make([]sluice.Result, len(idx))
		for j, i := range idx {
			enforced[j] = checks[i]
		}
		var err error
		if allowed, err = s.decideAll(ctx, enforced, res); err != nil {
			return false, err
		}
		for j, i := range idx {
			results[i] = res[j]
		}
	}
	for i, c := range checks {
		if !c.Policy.Shadow {
			continue
		}
		cost := c.Cost
		if !allowed {
			cost = 0
		}
		r, err := s.decider.Decide(ctx, sluice.Request{Policy: &c.Policy.Policy, Key: c.Key, Cost: cost})
		if err != nil {
			return false, err
		}
		if !allowed {
			r.Allowed = false
		}
		results[i] = r
	}
	return allowed, nil
}

// decideBanned decides a request that names a policy admitting nothing
// (config.Policy.DeniesAll), which no store can decide. When an enforced one
// applies the request is denied and every other check only peeked at;
// otherwise (shadow bans, or a peek) the other checks are decided as usual
// and the bans report Allowed false with nothing left.
func (s *Service) decideBanned(ctx context.Context, checks []Check, results []sluice.Result, banned bool) (bool, error) {
	rest := make([]Check, 0, len(checks))
	idx := make([]int, 0, len(checks))
	for i, c := range checks {
		if c.Policy.DeniesAll() {
			results[i] = sluice.Result{}
			continue
		}
		if banned {
			c.Cost = 0
		}
		rest = append(rest, c)
		idx = append(idx, i)
	}
	allowed := !banned
	if len(rest) > 0 {
		res := make([]sluice.Result, len(rest))
		ok, err := s.decide(ctx, rest, res)
		if err != nil {
			return false, err
		}
		allowed = allowed && ok
		for j, i := range idx {
			results[i] = res[j]
			if banned {
				results[i].Allowed = false
			}
		}
	}
	return allowed, nil
}

// decideAll decides enforced checks: one Decide for one check (the common
// case, and the cheaper call), DecideAll otherwise.
func (s *Service) decideAll(ctx context.Context, checks []Check, results []sluice.Result) (bool, error) {
	if len(checks) == 1 {
		c := checks[0]
		r, err := s.decider.Decide(ctx, sluice.Request{Policy: &c.Policy.Policy, Key: c.Key, Cost: c.Cost})
		if err != nil {
			return false, err
		}
		results[0] = r
		return r.Allowed, nil
	}
	reqs := make([]sluice.Request, len(checks))
	for i, c := range checks {
		reqs[i] = sluice.Request{Policy: &c.Policy.Policy, Key: c.Key, Cost: c.Cost}
	}
	if err := s.decider.DecideAll(ctx, reqs, results); err != nil {
		return false, err
	}
	for _, r := range results {
		if !r.Allowed {
			return false, nil
		}
	}
	return true, nil
}
