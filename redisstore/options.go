package redisstore

import (
	"crypto/tls"
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
	clock    sluice.Clock
	prefix   string
	timeout  time.Duration
	lazy     bool
	tls      *tls.Config
	password string
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
// control time.
//
// Keys still expire on the server's clock: a key is kept until the later of
// the instant its state is initial again, read on c as a Unix time, and the
// server's now plus the state's remaining ResetAfter (see the package doc,
// Expiry). So a client clock behind the server's never expires state early,
// and a clock ahead of it keeps state longer. A clock that runs slower than
// real time — a simulation stepping through virtual time, say — must start
// far enough ahead of the server's clock that its resets still lie in the
// future when the run reaches them; otherwise keys expire in real time
// before their virtual reset, admissions are forgotten and the exact
// algorithms over-admit. (The test suites start at 2100; `sluice-lab` a day
// ahead of the wall clock.)
func WithClock(c sluice.Clock) Option { return func(cf *config) { cf.clock = c } }

// WithPrefix sets the prefix of every key (default DefaultPrefix), so several
// applications can share a Redis. A prefix holding a hash tag ("{app}:") puts
// every key into one Cluster slot: then every all-or-nothing check runs as a
// single script, at the price of all the load on one node.
func WithPrefix(prefix string) Option { return func(cf *config) { cf.prefix = prefix } }

// WithTimeout bounds each Decide and DecideAll call (default DefaultTimeout),
// as a deadline added to the caller's context; d <= 0 adds none.
func WithTimeout(d time.Duration) Option { return func(cf *config) { cf.timeout = d } }

// WithLazyConnect makes Open return at once, even when Redis is unreachable,
// and connect in the background: calls made before the connection exists wait
// for the attempt in flight as long as their context allows, then fail with
// ErrNotConnected, and the next call starts another attempt. A service can
// then start before its Redis (no crash loop) and report itself unready until
// Redis answers. Without it Open fails when it cannot connect. Open only.
func WithLazyConnect() Option { return func(cf *config) { cf.lazy = true } }

// WithTLSConfig sets the TLS configuration of a rediss:// connection (CA
// roots, client certificate, server name), replacing the one Open derives
// from the URL. Open only.
func WithTLSConfig(c *tls.Config) Option { return func(cf *config) { cf.tls = c } }

// WithPassword sets the password Open authenticates with, replacing any in
// the URL, so the URL can be logged and the password kept in a secret. Open
// only.
func WithPassword(p string) Option { return func(cf *config) { cf.password = p } }
