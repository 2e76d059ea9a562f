package overrides

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice"
)

// backend is where overrides live: this process, or Redis.
type backend interface {
	// put stores o, refusing with ErrFull a new one beyond the bounds.
	put(ctx context.Context, o Override, now time.Time) error
	// remove deletes policy's override of target; false when there was none.
	remove(ctx context.Context, policy, target string) (bool, error)
	// load returns every override and the version they are at.
	load(ctx context.Context, now time.Time) (version int64, list []Override, err error)
	// version returns the version, which every change increments.
	version(ctx context.Context) (int64, error)
}

// Store keeps the overrides and a snapshot of them for the hot path. It is
// safe for concurrent use.
type Store struct {
	b       backend
	clock   sluice.Clock
	log     *slog.Logger
	poll    time.Duration
	prefix  string // WithKeyPrefix's
	current atomic.Pointer[Set]
	changed chan struct{} // a change may have happened elsewhere: reload

	mu      sync.Mutex // serializes reloads, so versions only move forward
	version int64
	loaded  bool

	changes *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
	gauged  map[string]bool
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock expiry is judged by (default sluice.SystemClock).
func WithClock(c sluice.Clock) Option { return func(s *Store) { s.clock = c } }

// WithLogger sets the logger every change is logged on (default slog.Default).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithKeyPrefix starts the Redis keys and channel of a Store NewRedis
// returns with prefix, before DefaultRedisPrefix, so that deployments with
// different prefixes on one Redis keep apart. prefix must not hold '{' or
// '}': the keys' own hash tag keeps them on one Cluster slot.
func WithKeyPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// WithPollInterval sets how often Run checks the version for a change it
// was not told of (default DefaultPollInterval).
func WithPollInterval(d time.Duration) Option { return func(s *Store) { s.poll = d } }

// Collectors returns the Store's metrics, for a Prometheus registry:
// sluice_overrides_changes_total{op} and sluice_overrides{policy}.
func (s *Store) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.changes, s.gauge}
}

// DefaultPollInterval is how often a Redis-backed Store checks the version:
// the safety net behind pub/sub, which tells of a change at once.
const DefaultPollInterval = time.Second

func newStore(b backend, opts []Option) *Store {
	s := &Store{b: b, clock: sluice.SystemClock(), log: slog.Default(), poll: DefaultPollInterval,
		changed: make(chan struct{}, 1), gauged: map[string]bool{},
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_overrides_changes_total",
			Help: "Overrides set (op=set) and removed (op=delete) through this node."}, []string{"op"}),
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_overrides",
			Help: "Overrides in force per policy, as this node sees them."}, []string{"policy"}),
	}
	for _, o := range opts {
		o(s)
	}
	s.current.Store(NewSet(nil))
	return s
}

// NewMemory returns a Store holding the overrides in this process only.
func NewMemory(opts ...Option) *Store {
	return newStore(&memoryBackend{}, opts)
}

// Snapshot returns the overrides in force. The Set never changes; a later
// change installs a new one.
func (s *Store) Snapshot() *Set { return s.current.Load() }

// Now is the Store's clock's time.
func (s *Store) Now() time.Time { return s.clock.Now() }

// Put sets o (replacing the override of the same policy and target), after
// checking it against base, the policy it overrides; o.UpdatedAt is set
// here. The change is in force on this node when Put returns.
func (s *Store) Put(ctx context.Context, base sluice.Policy, o Override) (Override, error) {
	now := s.clock.Now()
	o.Policy = base.Name
	if err := o.Validate(base, now); err != nil {
		return o, err
	}
	o.UpdatedAt = now
	if err := s.b.put(ctx, o, now); err != nil {
		return o, err
	}
	s.changes.WithLabelValues("set").Inc()
	s.log.Info("override set", "policy", o.Policy, "target", o.Target(), "limit", o.Limit, "period", o.Period,
		"burst", o.Burst, "expires_at", o.ExpiresAt, "reason", o.Reason)
	s.reloadAfterChange(ctx)
	return o, nil
}

// Delete removes policy's override of target (Override.Target's form);
// ErrNotFound when there is none.
func (s *Store) Delete(ctx context.Context, policy, target string) error {
	ok, err := s.b.remove(ctx, policy, target)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotFound
	}
	s.changes.WithLabelValues("delete").Inc()
	s.log.Info("override removed", "policy", policy, "target", target)
	s.reloadAfterChange(ctx)
	return nil
}

// reloadAfterChange puts a change just made in force here. The change is
// stored either way: when reading it back fails, Run's next check does it.
func (s *Store) reloadAfterChange(ctx context.Context) {
	if err := s.Reload(ctx); err != nil {
		s.log.Warn("the override change is stored but not yet read back; retrying", "error", err)
		s.notify()
	}
}

// Reload reads every override from the backend and installs them.
func (s *Store) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, list, err := s.b.load(ctx, s.clock.Now())
	if err != nil {
		return err
	}
	if s.loaded && v < s.version {
		return nil // a reload that started earlier finished later: keep the newer
	}
	s.install(v, NewSet(list))
	return nil
}

// install puts set in force and updates the gauge; s.mu is held.
func (s *Store) install(v int64, set *Set) {
	s.version, s.loaded = v, true
	s.current.Store(set)
	names := map[string]bool{}
	for _, p := range set.policyNames() {
		names[p] = true
		s.gauge.WithLabelValues(p).Set(float64(set.Count(p)))
	}
	for p := range s.gauged {
		if !names[p] {
			s.gauge.DeleteLabelValues(p)
		}
	}
	s.gauged = names
}

// refresh reloads when the version moved, and drops expired overrides from
// the snapshot.
func (s *Store) refresh(ctx context.Context) error {
	v, err := s.b.version(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	same := s.loaded && v == s.version
	s.mu.Unlock()
	if same && !s.hasExpired() {
		return nil
	}
	return s.Reload(ctx)
}

func (s *Store) hasExpired() bool {
	set, now := s.Snapshot(), s.clock.Now()
	for _, ps := range set.policies {
		for _, m := range []map[string]*Override{ps.exact, ps.prefixes} {
			for _, o := range m {
				if o.Expired(now) {
					return true
				}
			}
		}
	}
	return false
}

// Run keeps the snapshot current until ctx ends: it reloads when told of a
// change (Redis pub/sub) and checks the version every poll interval.
func (s *Store) Run(ctx context.Context) {
	if r, ok := s.b.(*redisBackend); ok {
		go r.subscribe(ctx, s.notify, s.log)
	}
	t := time.NewTicker(s.poll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
		case <-t.C:
		}
		err := s.refresh(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			s.log.Warn("cannot read the overrides; the last ones read stay in force", "error", err)
		case err == nil && failing:
			s.log.Info("reading the overrides again")
		}
		failing = err != nil
	}
}

// notify asks Run to reload.
func (s *Store) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}
