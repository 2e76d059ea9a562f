package failover

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// Store applies a fail policy to a primary store. It is safe for concurrent
// use.
type Store struct {
	primary  sluice.Store
	local    sluice.Store // FailLocal only
	mode     Mode
	nodes    int64
	clock    sluice.Clock
	br       breaker
	storeBr  []*breaker   // {&br}
	perNode  nodeBreakers // WithBreakerPerNode
	onChange func(node string, from, to BreakerState)
	timeouts timeouts
	failed   atomic.Uint64
	observer atomic.Pointer[func(Call)]
	health   health
	memo     denialMemo // FailLocal only

	mu      sync.RWMutex
	divided map[*sluice.Policy]*sluice.Policy // FailLocal with nodes > 1
}

var (
	_ sluice.Store    = (*Store)(nil)
	_ sluice.Resetter = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithMode sets the fail policy (default FailLocal).
func WithMode(m Mode) Option { return func(s *Store) { s.mode = m } }

// WithTimeout gives every call to the primary the fixed timeout d instead of
// the adaptive one; d < 0 sets none, d == 0 keeps the adaptive timeout. The
// caller's own deadline still ends a call sooner.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeouts.fixed = d } }

// WithAdaptiveTimeout sets the bounds of the adaptive timeout (defaults
// DefaultMinTimeout, DefaultMaxTimeout). Zero values keep the defaults.
func WithAdaptiveTimeout(lo, hi time.Duration) Option {
	return func(s *Store) {
		if lo > 0 {
			s.timeouts.min = lo
		}
		if hi > 0 {
			s.timeouts.max = hi
		}
	}
}

// BreakerSettings tunes the circuit breaker; zero fields keep the defaults.
type BreakerSettings struct {
	// MinCalls is the window: the breaker judges the last MinCalls calls,
	// and opens only once it has seen that many (DefaultMinCalls).
	MinCalls int
	// Window is how long a failure counts (DefaultWindow).
	Window time.Duration
	// FailureRate in (0, 1] opens the breaker when that share of the
	// window failed (DefaultFailureRate).
	FailureRate float64
	// Cooldown is how long an open breaker keeps calls away from the
	// primary before probing (DefaultCooldown).
	Cooldown time.Duration
	// Probes is how many calls a half_open breaker lets through; all must
	// succeed to close it (DefaultProbes).
	Probes int
}

// WithBreaker tunes the circuit breaker.
func WithBreaker(b BreakerSettings) Option {
	return func(s *Store) {
		if b.MinCalls > 0 {
			s.br.window = min(b.MinCalls, 1<<20)
		}
		if b.Window > 0 {
			s.br.age = b.Window
		}
		if b.FailureRate > 0 && b.FailureRate <= 1 {
			s.br.rate = b.FailureRate
		}
		if b.Cooldown > 0 {
			s.br.cooldown = b.Cooldown
		}
		if b.Probes > 0 {
			s.br.probes = min(b.Probes, 1<<20)
		}
	}
}

// WithLocal sets the store FailLocal decides on (default memory.New()).
func WithLocal(local sluice.Store) Option { return func(s *Store) { s.local = local } }

// WithNodes makes FailLocal divide every limit (and burst) by n, rounding
// down but never below 1, so n nodes deciding locally at once admit about
// what the shared limit does. n <= 1 leaves limits alone. Set it to the
// number of processes sharing the primary: without it (the default, 1) each
// of them admits the whole limit locally, N of them N times it.
func WithNodes(n int) Option { return func(s *Store) { s.nodes = int64(max(1, n)) } }

// WithClock sets the clock the breaker's cool-down and the calls' latencies
// are measured on (default sluice.SystemClock()); tests use a fake one. The
// timeout itself always runs on real time.
func WithClock(c sluice.Clock) Option { return func(s *Store) { s.clock = c } }

// WithStateChange calls f on every breaker transition, for logs and metrics.
// f runs with the breaker's lock held: it must be quick and must not call
// the Store.
func WithStateChange(f func(from, to BreakerState)) Option {
	return WithNodeStateChange(func(_ string, from, to BreakerState) { f(from, to) })
}

// WithNodeStateChange is WithStateChange with the name of the node whose
// breaker changed (see WithBreakerPerNode; "" for the store's own breaker).
// It replaces any f set by WithStateChange, and the other way round.
func WithNodeStateChange(f func(node string, from, to BreakerState)) Option {
	return func(s *Store) { s.onChange = f }
}

// New returns a Store deciding on primary, with the fail policy, timeout and
// breaker configured by opts. The fail policy is FailLocal unless WithMode
// says otherwise, and FailLocal divides nothing unless WithNodes says by how
// many: give it the number of nodes sharing the primary,
//
//	failover.New(redis, failover.WithNodes(4))
//
// or every node falling back admits the whole limit.
func New(primary sluice.Store, opts ...Option) *Store {
	s := &Store{primary: primary, mode: FailLocal, nodes: 1, br: newBreaker()}
	s.timeouts.min, s.timeouts.max = DefaultMinTimeout, DefaultMaxTimeout
	for _, o := range opts {
		o(s)
	}
	s.timeouts.max = max(s.timeouts.max, s.timeouts.min)
	s.initBreakers()
	s.timeouts.init()
	if s.clock == nil {
		s.clock = sluice.SystemClock()
	}
	if s.mode == FailLocal && s.local == nil {
		s.local = memory.New()
	}
	return s
}

// Close returns nil. The Store holds no connection or goroutine, and it
// closes neither its primary nor its local store: whoever opened them closes
// them, after this Store (a lease.Store around it first).
func (s *Store) Close() error { return nil }

// Local returns the store FailLocal decides on (set by WithLocal under any
// mode, but used only under FailLocal).
func (s *Store) Local() sluice.Store { return s.local }

// Mode returns the fail policy.
func (s *Store) Mode() Mode { return s.mode }

// Primary returns the store the Store protects.
func (s *Store) Primary() sluice.Store { return s.primary }

// Failures returns how many calls the primary has failed (errors and
// timeouts; not the calls an open breaker kept away from it).
func (s *Store) Failures() uint64 { return s.failed.Load() }

// Timeout returns the timeout the next call to the primary gets (0: none).
func (s *Store) Timeout() time.Duration { return s.timeouts.timeout() }

// Budget returns how long a decision marked by MarkStart may take, waits
// included: the maximum timeout (WithAdaptiveTimeout) or the fixed one
// (WithTimeout); 0 when calls have no timeout. A caller that waits before it
// calls the Store (package lease, for its key's reservation in flight) waits
// at most this long since the mark, then calls with nothing left, and the
// fail policy decides at once.
func (s *Store) Budget() time.Duration { return s.timeouts.budget() }

// Call describes one finished call to the primary, for metrics and logs.
type Call struct {
	// Latency is how long the primary took to answer or fail.
	Latency time.Duration
	// Err is nil for a call the primary answered, else the store failure
	// (wrapping ErrTimeout when the Store stopped waiting).
	Err error
}

// Observe makes the Store call f after every call to the primary that
// answered or failed (not the caller's own mistakes or cancellations),
// replacing any earlier f. f must be quick and safe for concurrent use.
func (s *Store) Observe(f func(Call)) { s.observer.Store(&f) }

// Decide implements sluice.Store.
func (s *Store) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	var r sluice.Result
	err := s.call(ctx, s.breakersOf([]sluice.Request{req}), func(cctx context.Context) (err error) {
		r, err = s.primary.Decide(cctx, req)
		return err
	})
	if err == nil && s.mode == FailLocal && !r.Allowed {
		s.memo.note(req, r, s.clock.Now())
	}
	if err == nil || !isStoreFailure(ctx, err) {
		return r, err
	}
	return s.degraded(ctx, req, err)
}

// DecideAll implements sluice.Store: the fail policy applies to the batch as
// a whole, so it stays all or nothing — also when the primary failed part
// way through it.
func (s *Store) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	err := s.call(ctx, s.breakersOf(reqs), func(cctx context.Context) error {
		return s.primary.DecideAll(cctx, reqs, results)
	})
	if err == nil && s.mode == FailLocal && len(reqs) > 0 && !results[0].Allowed {
		now := s.clock.Now()
		for i, r := range reqs {
			s.memo.note(r, results[i], now)
		}
	}
	if err == nil || !isStoreFailure(ctx, err) {
		return err
	}
	return s.degradedAll(ctx, reqs, results, err)
}

// call runs f on the primary under the breakers brs and the timeout, and
// feeds its outcome to them. Its error is ErrBreakerOpen when a breaker kept
// the call away.
func (s *Store) call(ctx context.Context, brs []*breaker, f func(context.Context) error) error {
	var buf [4]ticket
	tickets := buf[:]
	if len(brs) > len(buf) {
		tickets = make([]ticket, len(brs))
	}
	if !allowAll(brs, s.clock, tickets) {
		return ErrBreakerOpen
	}
	cctx, cancel, ok := s.timeouts.bound(ctx)
	if !ok {
		for i, b := range brs {
			b.release(tickets[i]) // no call: nothing learnt about the store
		}
		return &timeoutError{err: errBudgetSpent}
	}
	start := s.clock.Now()
	err := f(cctx)
	latency := s.clock.Now().Sub(start)
	if err != nil && timedOut(cctx) && ctx.Err() == nil {
		err = &timeoutError{after: latency, err: err}
	}
	cancel()
	switch {
	case err == nil:
		for i, b := range brs {
			b.success(tickets[i])
		}
		s.timeouts.observe(latency)
	case ctx.Err() != nil:
		// The caller gave up, or its own deadline, shorter than the timeout,
		// passed: that says nothing about the store (and counting it would
		// let a client with a tiny deadline open the breaker for everyone).
		for i, b := range brs {
			b.release(tickets[i])
		}
		return err
	case callerError(err):
		for i, b := range brs {
			b.success(tickets[i]) // the store answered; the request was wrong
		}
		return err
	default:
		s.failed.Add(1)
		blamed := s.failedOn(brs, err)
		for i, b := range brs {
			if blamed == nil || b == blamed {
				b.failure(tickets[i], s.clock.Now())
			} else {
				b.release(tickets[i]) // answered or not, it says nothing about b
			}
		}
	}
	s.health.record(s.clock.Now(), err)
	if o := s.observer.Load(); o != nil {
		(*o)(Call{Latency: latency, Err: err})
	}
	return err
}

// timeoutError is a call the Store stopped waiting for.
type timeoutError struct {
	after time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	if e.err == errBudgetSpent {
		return ErrTimeout.Error() + ": " + errBudgetSpent.Error()
	}
	return ErrTimeout.Error() + " after " + e.after.Round(time.Microsecond).String()
}

// Unwrap returns ErrTimeout (hence context.DeadlineExceeded) and the error the
// primary returned when its context ended.
func (e *timeoutError) Unwrap() []error { return []error{ErrTimeout, e.err} }

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
	cctx, cancel, ok := s.timeouts.bound(ctx)
	if !ok {
		return &timeoutError{err: errBudgetSpent}
	}
	defer cancel()
	return r.Reset(cctx, p, key)
}

// isStoreFailure tells a store's failure from a caller's mistake, which the
// store answered, and from the caller's own cancellation or deadline.
func isStoreFailure(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !callerError(err)
}

// callerError reports whether err is the caller's mistake, not the store's.
func callerError(err error) bool {
	for _, caller := range callerErrors {
		if errors.Is(err, caller) {
			return true
		}
	}
	return false
}

var callerErrors = []error{sluice.ErrInvalidKey, sluice.ErrInvalidCost, sluice.ErrExceedsCapacity,
	sluice.ErrInvalidPolicy, sluice.ErrDuplicateCheck, sluice.ErrAcquireOnly, sluice.ErrNotConcurrency}
