package lease

import (
	"time"

	"github.com/sluicehq/sluice"
)

// Option configures a Store.
type Option func(*Store)

// WithTTL sets the lease lifetime d for every policy. The default (0) is a
// twentieth of each policy's span — P for fixed_window, B·T for the buckets —
// which gives the buckets an overshoot bound of 1.05 (see Store.Bound).
func WithTTL(d time.Duration) Option { return func(s *Store) { s.ttl = max(0, d) } }

// WithMaxLease caps the units one reservation takes (n ≥ 1). The default (0)
// is a tenth of each policy's capacity. It bounds what an idle or dead node
// can strand.
func WithMaxLease(n int64) Option { return func(s *Store) { s.maxLease = max(0, n) } }

// WithOff makes the store decide every policy on the remote store unless
// SetPolicies gives it settings that are not Off: leases for the policies
// that ask for them only.
func WithOff() Option { return func(s *Store) { s.off = true } }

// WithClock makes the store read time from c (tests use a fake clock). It
// must tell the same time as the remote store's clock.
func WithClock(c sluice.Clock) Option { return func(s *Store) { s.clock = c } }

// WithSweepEvery sets how often (by the store's clock, checked on each
// decision) expired leases of other keys are given back. Default 10ms. Every
// 100th sweep also forgets the leases of keys idle for longer than their TTL.
func WithSweepEvery(d time.Duration) Option {
	return func(s *Store) { s.sweepEvery = max(time.Microsecond, d) }
}
