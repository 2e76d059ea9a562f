package redisstore

import (
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultPrefix starts every key the store writes, unless WithPrefix says
// otherwise.
const DefaultPrefix = "sluice:"

// DefaultTimeout bounds each call unless WithTimeout says otherwise. A rate
// limiter sits in front of every request it guards, so it must answer fast
// or get out of the way: a decision is one round trip that takes well under a
// millisecond on a healthy network, and 100ms is long enough to ride out a
// hiccup yet short enough that a stalled Redis surfaces as an error the caller
// can act on (fail open, fail closed, fall back to a local store) instead of
// piling up requests. The fault-tolerance work refines this.
const DefaultTimeout = 100 * time.Millisecond

// Option configures a Store.
type Option func(*config)

type config struct {
	clock   sluice.Clock
	prefix  string
	timeout time.Duration
}

func newConfig(opts []Option) config {
	cf := config{prefix: DefaultPrefix, timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cf)
	}
	return cf
}

// WithClock makes the scripts decide at c's time, passed with each call,
// instead of reading Redis TIME. Every client then needs a well-synchronized
// clock: two clients whose clocks differ see different windows. The default,
// server time, needs no synchronization at all. Tests use WithClock to
// control time. Keys still expire on the server's clock, no earlier than
// their state is initial (see the package doc, Expiry).
func WithClock(c sluice.Clock) Option { return func(cf *config) { cf.clock = c } }

// WithPrefix sets the prefix of every key (default DefaultPrefix), so several
// applications can share a Redis. A prefix holding a hash tag ("{app}:") puts
// every key into one Cluster slot: then every all-or-nothing check runs as a
// single script, at the price of all the load on one node.
func WithPrefix(prefix string) Option { return func(cf *config) { cf.prefix = prefix } }

// WithTimeout bounds each Decide and DecideAll call (default DefaultTimeout),
// as a deadline added to the caller's context; d <= 0 adds none.
func WithTimeout(d time.Duration) Option { return func(cf *config) { cf.timeout = d } }
