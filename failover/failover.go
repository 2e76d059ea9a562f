package failover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// Mode is the fail policy: what a Store does with a decision its primary
// store could not make.
type Mode int

const (
	// FailOpen admits the request without counting it.
	FailOpen Mode = iota
	// FailClosed denies it: the call returns an *UnavailableError.
	FailClosed
	// FailLocal decides it on a local in-process store.
	FailLocal
)

func (m Mode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	case FailLocal:
		return "local"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "open", "closed" or "local".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{FailOpen, FailClosed, FailLocal} {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("failover: unknown fail policy %q (want open, closed or local)", s)
}

// Defaults.
const (
	// DefaultTimeout bounds each call to the primary. Envoy gives its rate
	// limit service 20ms before applying its own failure mode; 10ms leaves
	// the other half for the gRPC hop and the queueing before a request is
	// handled, so Sluice's fail policy, not Envoy's, decides a call that
	// Redis cannot answer in time. A healthy Redis answers in well under a
	// millisecond; raise it when Redis is far away and no Envoy waits.
	DefaultTimeout = 10 * time.Millisecond
	// DefaultFailures is how many consecutive failures open the breaker: a
	// single timeout is noise, five in a row are an outage.
	DefaultFailures = 5
	// DefaultCooldown is how long an open breaker waits before probing.
	// Recovery is noticed within about this long after the primary is back.
	DefaultCooldown = time.Second
)

// ErrUnavailable is wrapped by the error of every call a FailClosed Store
// denies because the primary could not decide.
var ErrUnavailable = errors.New("failover: store unavailable")

// ErrBreakerOpen is the cause of calls not tried because the breaker is open.
var ErrBreakerOpen = errors.New("circuit breaker open")

// UnavailableError is a FailClosed Store's denial. errors.Is finds both
// ErrUnavailable and the cause in it.
type UnavailableError struct {
	// Cause is the primary's error, or ErrBreakerOpen.
	Cause error
	// RetryAfter is when the breaker next probes the primary: the earliest a
	// retry can be decided by it (0 when the breaker is closed).
	RetryAfter time.Duration
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%v (failing closed): %v", ErrUnavailable, e.Cause)
}

// Unwrap returns ErrUnavailable and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Cause} }

// Store applies a fail policy to a primary store. It is safe for concurrent
// use.
type Store struct {
	primary sluice.Store
	local   sluice.Store // FailLocal only
	mode    Mode
	timeout time.Duration
	nodes   int64
	clock   sluice.Clock
	br      breaker
	failed  atomic.Uint64

	mu      sync.RWMutex
	divided map[*sluice.Policy]*sluice.Policy // FailLocal with nodes > 1
}

var (
	_ sluice.Store    = (*Store)(nil)
	_ sluice.Resetter = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithMode sets the fail policy (default FailOpen).
func WithMode(m Mode) Option { return func(s *Store) { s.mode = m } }

// WithTimeout bounds each call to the primary (default DefaultTimeout), as a
// deadline on the caller's context unless that ends sooner; d <= 0 adds none.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithBreaker sets how many consecutive failures open the breaker and how
// long it stays open before probing (defaults DefaultFailures,
// DefaultCooldown). Zero values keep the defaults.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(s *Store) {
		if failures > 0 {
			s.br.threshold = int32(min(failures, 1<<30))
		}
		if cooldown > 0 {
			s.br.cooldown = cooldown
		}
	}
}

// WithLocal sets the store FailLocal decides on (default memory.New()).
func WithLocal(local sluice.Store) Option { return func(s *Store) { s.local = local } }

// WithNodes makes FailLocal divide every limit (and burst) by n, rounding
// down but never below 1, so n nodes deciding locally at once admit about
// what the shared limit does. n <= 1 leaves limits alone.
func WithNodes(n int) Option { return func(s *Store) { s.nodes = int64(max(1, n)) } }

// WithClock sets the clock the breaker's cool-down is measured on (default
// sluice.SystemClock()); tests use a fake one.
func WithClock(c sluice.Clock) Option { return func(s *Store) { s.clock = c } }

// WithStateChange calls f on every breaker transition, for logs and metrics.
// f runs with the breaker's lock held: it must be quick and must not call
// the Store.
func WithStateChange(f func(from, to BreakerState)) Option {
	return func(s *Store) { s.br.onChange = f }
}

// New returns a Store deciding on primary, with the fail policy and breaker
// configured by opts.
func New(primary sluice.Store, opts ...Option) *Store {
	s := &Store{primary: primary, timeout: DefaultTimeout, nodes: 1}
	s.br.threshold, s.br.cooldown = DefaultFailures, DefaultCooldown
	for _, o := range opts {
		o(s)
	}
	if s.clock == nil {
		s.clock = sluice.SystemClock()
	}
	if s.mode == FailLocal && s.local == nil {
		s.local = memory.New()
	}
	return s
}

// Mode returns the fail policy.
func (s *Store) Mode() Mode { return s.mode }

// Primary returns the store the Store protects.
func (s *Store) Primary() sluice.Store { return s.primary }

// Failures returns how many calls the primary has failed (errors and
// timeouts; not the calls an open breaker kept away from it).
func (s *Store) Failures() uint64 { return s.failed.Load() }

// State returns the breaker's state.
func (s *Store) State() BreakerState { return BreakerState(s.br.state.Load()) }

// Decide implements sluice.Store.
func (s *Store) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	call, probe := s.br.allow(s.clock)
	if !call {
		return s.degraded(ctx, req, ErrBreakerOpen)
	}
	cctx, cancel := s.bound(ctx)
	r, err := s.primary.Decide(cctx, req)
	cancel()
	if err = s.record(ctx, err, probe); err == nil {
		return r, nil
	}
	if !isStoreFailure(ctx, err) {
		return sluice.Result{}, err
	}
	return s.degraded(ctx, req, err)
}

// DecideAll implements sluice.Store: the fail policy applies to the batch as
// a whole, so it stays all or nothing.
func (s *Store) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	call, probe := s.br.allow(s.clock)
	if !call {
		return s.degradedAll(ctx, reqs, results, ErrBreakerOpen)
	}
	cctx, cancel := s.bound(ctx)
	err := s.primary.DecideAll(cctx, reqs, results)
	cancel()
	if err = s.record(ctx, err, probe); err == nil || !isStoreFailure(ctx, err) {
		return err
	}
	return s.degradedAll(ctx, reqs, results, err)
}

// Reset implements sluice.Resetter: it resets the key in the primary (no
// fail policy: an operator wants to know a reset failed) and in the local
// store, if any.
func (s *Store) Reset(ctx context.Context, p *sluice.Policy, key string) error {
	if l, ok := s.local.(sluice.Resetter); ok {
		if err := l.Reset(ctx, s.localPolicy(p), key); err != nil {
			return err
		}
	}
	r, ok := s.primary.(sluice.Resetter)
	if !ok {
		return errors.New("failover: the primary store cannot reset keys")
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	return r.Reset(cctx, p, key)
}

// Probe asks the primary directly, bypassing the breaker and the fail
// policy, whether it answers: a peek (cost 0) on p and key, which changes
// nothing. Readiness checks use it.
func (s *Store) Probe(ctx context.Context, p *sluice.Policy, key string) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.primary.Decide(cctx, sluice.Request{Policy: p, Key: key})
	return err
}

// bound adds the timeout to ctx, unless ctx already ends sooner.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// record feeds a call's outcome to the breaker and returns err.
func (s *Store) record(ctx context.Context, err error, probe bool) error {
	switch {
	case err == nil:
		s.br.success()
	case ctx.Err() != nil:
		// The caller gave up, or its own deadline, shorter than the timeout,
		// passed: that says nothing about the store (and counting it would
		// let a client with a tiny deadline open the breaker for everyone).
		if probe {
			s.br.release(s.clock.Now())
		}
	case !isStoreFailure(ctx, err):
		s.br.success() // the store answered; the request was wrong
	default:
		s.failed.Add(1)
		s.br.failure(s.clock.Now(), probe)
	}
	return err
}

// isStoreFailure tells a store's failure from a caller's mistake, which the
// store answered, and from the caller's own cancellation or deadline.
func isStoreFailure(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	for _, caller := range callerErrors {
		if errors.Is(err, caller) {
			return false
		}
	}
	return true
}

var callerErrors = []error{sluice.ErrInvalidKey, sluice.ErrInvalidCost, sluice.ErrExceedsCapacity,
	sluice.ErrInvalidPolicy, sluice.ErrDuplicateCheck}

// degraded applies the fail policy to one request.
func (s *Store) degraded(ctx context.Context, req sluice.Request, cause error) (sluice.Result, error) {
	switch s.mode {
	case FailClosed:
		return sluice.Result{}, s.unavailable(cause)
	case FailLocal:
		return s.decideLocal(ctx, req)
	default:
		return openResult(req), nil
	}
}

func (s *Store) degradedAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result, cause error) error {
	switch s.mode {
	case FailClosed:
		return s.unavailable(cause)
	case FailLocal:
		return s.decideAllLocal(ctx, reqs, results)
	default:
		for i, r := range reqs {
			results[i] = openResult(r)
		}
		return nil
	}
}

func (s *Store) unavailable(cause error) error {
	return &UnavailableError{Cause: cause, RetryAfter: s.br.retryIn(s.clock.Now())}
}

// openResult admits req as if its key were fresh: the state is unknown, and
// a fresh key is what the client would most likely meet.
func openResult(req sluice.Request) sluice.Result {
	return sluice.Result{Allowed: true, Limit: req.Policy.Limit, Remaining: max(0, req.Policy.Capacity()-req.Cost), Degraded: true}
}

func (s *Store) decideLocal(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	lp := s.localPolicy(req.Policy)
	if req.Cost > lp.Capacity() {
		return overLocalCapacity(lp), nil
	}
	req.Policy = lp
	r, err := s.local.Decide(ctx, req)
	r.Degraded = true
	return r, err
}

func (s *Store) decideAllLocal(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	local := make([]sluice.Request, len(reqs))
	for i, r := range reqs {
		lp := s.localPolicy(r.Policy)
		if r.Cost > lp.Capacity() {
			// The divided limit can never admit this cost: deny the batch.
			for j, r := range reqs {
				results[j] = overLocalCapacity(s.localPolicy(r.Policy))
			}
			return nil
		}
		local[i] = sluice.Request{Policy: lp, Key: r.Key, Cost: r.Cost}
	}
	err := s.local.DecideAll(ctx, local, results)
	for i := range results {
		results[i].Degraded = true
	}
	return err
}

// overLocalCapacity denies a cost the divided policy can never admit: there
// is no wait after which it would pass, so RetryAfter is a period, the
// soonest the primary might be back to decide it.
func overLocalCapacity(lp *sluice.Policy) sluice.Result {
	return sluice.Result{Limit: lp.Limit, RetryAfter: lp.Period, Degraded: true}
}

// maxDivided bounds the cache of divided policies; policies are replaced on
// every config reload, so old ones are dropped wholesale.
const maxDivided = 4096

// localPolicy returns p with its limit and burst divided by the node count.
func (s *Store) localPolicy(p *sluice.Policy) *sluice.Policy {
	if s.nodes <= 1 {
		return p
	}
	s.mu.RLock()
	lp, ok := s.divided[p]
	s.mu.RUnlock()
	if ok {
		return lp
	}
	d := *p
	d.Limit = max(1, p.Limit/s.nodes)
	if p.Burst > 0 {
		d.Burst = max(1, p.Burst/s.nodes)
	}
	lp = &d
	if lp.Validate() != nil {
		lp = p // cannot happen for a valid p: smaller limits stay valid
	}
	s.mu.Lock()
	if s.divided == nil || len(s.divided) >= maxDivided {
		s.divided = make(map[*sluice.Policy]*sluice.Policy)
	}
	s.divided[p] = lp
	s.mu.Unlock()
	return lp
}
