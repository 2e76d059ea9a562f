// Package storestack builds the store a Sluice server decides on, layer by
// layer, from the store section of its configuration, and names every layer
// it built, so that the server reaches each (for its metrics, readiness,
// fail policy and leases) by name rather than by looking inside the store:
//
//	memory://   Memory
//	redis://    Redis, under Failover (the fail policy, with Local, the
//	            memory store of on_error: local, beside it), under Lease
//	            (store.lease)
//
// and, with tracing on, Traced over the top. Decisions go to Decider.
package storestack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// Stack is a store and its layers. A layer the stack does not have is nil.
type Stack struct {
	// Store is the top layer (not traced): what decides.
	Store sluice.Store

	// Memory is the memory store, when it is the store (memory://).
	Memory *memory.Store
	// Redis is the Redis store (redis://, rediss://, unix://).
	Redis *redisstore.Store
	// Failover applies the fail policy (store.on_error) over Redis.
	Failover *failover.Store
	// Local is Failover's local store, under on_error: local.
	Local *memory.Store
	// Lease decides from quota leased from Failover (store.lease).
	Lease *lease.Store
	// Traced is Store with a span for each call, when tracing is on.
	Traced *tracing.Store

	// Resetter forgets a key's state (the admin API's reset); nil when the
	// stack cannot.
	Resetter sluice.Resetter
	// Board holds the demand boards fair-share policies share demand
	// through: the store every node shares; nil when it keeps none.
	Board sluice.DemandBoard

	closers []func() error // in the order to run them
}

// Decider is the store decisions go to: Store, traced when tracing is on.
func (s *Stack) Decider() sluice.Store {
	if s.Traced != nil {
		return s.Traced
	}
	return s.Store
}

// Tracer is the tracer of the Traced layer: nil when tracing is off.
func (s *Stack) Tracer() *tracing.Tracer {
	if s.Traced == nil {
		return nil
	}
	return s.Traced.Tracer()
}

// FailMode names the fail policy, "none" without one, for metrics and logs.
func (s *Stack) FailMode() string {
	if s.Failover == nil {
		return "none"
	}
	return s.Failover.Mode().String()
}

// Close releases the stack: it stops its background work, gives leased
// quota back and closes its connections. Safe to call on any Stack. Its
// error says what failed; a failed release of leased units leaves them
// consumed until their windows pass (under-admission, never over).
func (s *Stack) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// Option configures Open and Of.
type Option func(*options)

type options struct {
	log    *slog.Logger
	tracer *tracing.Tracer
}

// WithLogger sets the logger of breaker transitions, the Redis store's mode
// and the memory store's pressure (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithTracer traces every store call on t (nil: off, the default): the
// stack gets its Traced layer, and a service deciding on the stack traces
// its decisions on t too.
func WithTracer(t *tracing.Tracer) Option { return func(o *options) { o.tracer = t } }

func newOptions(opts []Option) options {
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Of is a stack of store as it is, built elsewhere (tests, a library user's
// own store): its layers are unknown, so it has none but Traced; it resets
// keys when store is a sluice.Resetter.
func Of(store sluice.Store, opts ...Option) *Stack {
	s := &Stack{Store: store}
	s.Resetter, _ = store.(sluice.Resetter)
	s.Board, _ = store.(sluice.DemandBoard)
	s.trace(newOptions(opts))
	return s
}

// trace adds the Traced layer when o has a tracer.
func (s *Stack) trace(o options) {
	if o.tracer != nil {
		s.Traced = o.tracer.WrapStore(s.Store, s.FailMode())
	}
}

// Open builds the stack cfg describes:
//
//	memory:// (or "")                the embedded memory store: one process, no
//	                                 sharing between nodes
//	redis://[user:pass@]host:port    Redis, a Cluster (add ?addr=host:port for
//	rediss://…  unix://…             more seed nodes) or Sentinel; see redisstore.Open
//
// A Redis store is opened lazily — the service starts while Redis is down and
// connects when it can — and wrapped in a failover.Store applying cfg's fail
// policy (local unless set), timeout (adaptive unless set) and circuit
// breaker; with cfg.Lease, that in a lease.Store (Close gives the unused
// quota back). Breaker transitions, and once how the store runs its Lua
// (functions or scripts, and why), are logged. Check reports what Open
// would refuse, without connecting.
func Open(cfg config.Store, opts ...Option) (*Stack, error) {
	o := newOptions(opts)
	log := o.log
	rc, problems := readStore(cfg)
	if len(problems) > 0 {
		return nil, problems[0]
	}
	s := &Stack{}
	if rc == nil {
		s.Memory = memory.New(memoryOptions(cfg, log.With("store", "memory"))...)
		s.Store, s.Resetter, s.Board = s.Memory, s.Memory, s.Memory
		s.trace(o)
		return s, nil
	}
	for _, w := range Warnings(cfg) {
		log.Warn("store", "warning", w)
	}
	rs, err := openRedis(cfg, rc)
	if err != nil {
		return nil, err
	}
	s.Redis = rs
	stopModeLog := startModeLog(rs, log)
	s.closers = append(s.closers, func() error { stopModeLog(); return nil }, rs.Close)
	fopts := []failover.Option{
		failover.WithMode(rc.mode),
		failover.WithTimeout(cfg.Timeout),
		failover.WithAdaptiveTimeout(cfg.TimeoutMin, cfg.TimeoutMax),
		failover.WithBreaker(failover.BreakerSettings{
			MinCalls:    cfg.Breaker.MinCalls,
			Window:      cfg.Breaker.Window,
			FailureRate: float64(cfg.Breaker.FailureRate) / 100,
			Cooldown:    cfg.Breaker.Cooldown,
			Probes:      cfg.Breaker.Probes,
		}),
		failover.WithNodes(cfg.Nodes),
		// A breaker per shard of a sharded store, per master of a Cluster:
		// one node down sends only its own keys to the fail policy.
		failover.WithBreakerPerNode(func(r sluice.Request) string { return rs.NodeOf(r.Policy, r.Key) }),
		failover.WithNodeStateChange(breakerLog(log, rc.mode)),
	}
	if rc.mode == failover.FailLocal {
		// Only on_error: local ever decides on it.
		s.Local = memory.New(memoryOptions(cfg, log.With("store", "local"))...)
		fopts = append(fopts, failover.WithLocal(s.Local))
	}
	s.Failover = failover.New(rs, fopts...)
	s.Store, s.Resetter, s.Board = s.Failover, s.Failover, s.Failover
	if cfg.Lease != nil {
		// Leases sit outside the fail policy, which then times and counts
		// only the calls that reach Redis: a node spends its lease while
		// Redis is down, and the fail policy decides once it needs a new one.
		lopts := []lease.Option{lease.WithTTL(cfg.Lease.TTL), lease.WithMaxLease(cfg.Lease.MaxLease)}
		if cfg.Lease.Off {
			lopts = append(lopts, lease.WithOff())
		}
		s.Lease = lease.New(s.Failover, lopts...)
		// Released before the connections close, so the quota goes back.
		s.closers = append([]func() error{s.Lease.Close}, s.closers...)
		// A lease holds units Redis alone cannot forget: no reset.
		s.Store, s.Resetter = s.Lease, nil
	}
	s.trace(o)
	return s, nil
}

// openRedis opens the Redis store cfg names: with a PerSecondURL, routed
// by PerSecond over the two (redisstore.OpenRouted), so that a request
// spanning both is still decided all or nothing (as across shards).
func openRedis(cfg config.Store, rc *redisSettings) (*redisstore.Store, error) {
	if cfg.PerSecondURL == "" {
		rs, err := redisstore.Open(cfg.URL, rc.opts...)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", RedactURL(cfg.URL), Redact(err, cfg.URL))
		}
		return rs, nil
	}
	rs, err := redisstore.OpenRouted([]string{cfg.URL, cfg.PerSecondURL}, PerSecond, rc.opts...)
	if err != nil {
		return nil, fmt.Errorf("store %s, per second %s: %w", RedactURL(cfg.URL), RedactURL(cfg.PerSecondURL),
			Redact(Redact(err, cfg.URL), cfg.PerSecondURL))
	}
	return rs, nil
}

// PerSecond is the route of a store with a PerSecondURL: 1 (that Redis)
// for a limit of a period under a minute, as envoyproxy/ratelimit sends its
// limits of unit SECOND to REDIS_PERSECOND_URL, else 0 (the store's URL).
// The period is that of the limit a request is decided under, an override's
// or a plan's included.
func PerSecond(p *sluice.Policy) int {
	if p.Period < time.Minute {
		return 1
	}
	return 0
}

// breakerLog logs each breaker transition: a warning when one opens, info
// when it closes again.
func breakerLog(log *slog.Logger, mode failover.Mode) func(node string, from, to failover.BreakerState) {
	return func(node string, from, to failover.BreakerState) {
		level := slog.LevelWarn
		if to == failover.BreakerClosed {
			level = slog.LevelInfo
		}
		attrs := []any{"from", from.String(), "to", to.String(), "on_error", mode.String()}
		if node != "" {
			attrs = append(attrs, "node", node)
		}
		log.Log(context.Background(), level, "store circuit breaker", attrs...)
	}
}
