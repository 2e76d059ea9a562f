// Package limitcore is the decision core that httplimit and grpclimit share:
// the list of limits and the options they have in common, how a request's
// key for each limit is derived, the enforced limits decided all or nothing,
// the shadow limits decided apart, and the retry and delay a decision
// advertises. Each of those packages keeps only what belongs to its protocol:
// how keys are read from a request and how a decision is written back.
//
// The core is generic over R, the request as the key functions see it.
package limitcore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultMaxDelay is how long a request waits at most for a leaky bucket's
// Delay unless WithMaxDelay says otherwise.
const DefaultMaxDelay = 10 * time.Second

// Quota is one limit and the Result it gave.
type Quota = sluice.Quota

// KeyFunc derives a request's key for one limit: "" when the request has
// none, an error when the key cannot be worked out.
type KeyFunc[R any] func(R) (string, error)

// Limit is one limit: a limiter and how to key requests for it.
type Limit[R any] struct {
	Limiter *sluice.Limiter
	// Policy is a copy of the limiter's, so that a Quota can point at it.
	Policy sluice.Policy
	Key    KeyFunc[R]
	// Fallback keys the requests Key has no key for; nil for none.
	Fallback KeyFunc[R]
	Shadow   bool
	// Pick, when set, returns the limiter a request is decided by instead
	// of Limiter: one of the policy's plans, under the same name and
	// algorithm (so on the same state) with another limit. Nil: Limiter.
	Pick func(R) *sluice.Limiter
	// Usage, when set, returns what a handled request used once its
	// response has ended (the tokens it reports, say), which Core.Charge
	// charges to its key; an error is a report that cannot be read.
	Usage func(R) (int64, error)
}

// Settings are the options both packages have. Build one with NewSettings;
// the package's options set it, and New turns it into a Core.
type Settings[R any] struct {
	Limits    []Limit[R]
	ShadowAll bool
	// Logger logs shadow-limit failures and the packages' default handlers.
	Logger   *slog.Logger
	Jitter   time.Duration
	MaxDelay time.Duration
	// Quiet: no rate-limit fields on admitted requests.
	Quiet bool
	// V6Bits is how many leading bits of an IPv6 client address key it.
	V6Bits int

	pkg   string          // the package name that prefixes errors and logs
	names map[string]bool // policy names so far, to refuse shared counters
}

// NewSettings returns the defaults, for package pkg ("httplimit", ...).
func NewSettings[R any](pkg string) Settings[R] {
	return Settings[R]{MaxDelay: DefaultMaxDelay, V6Bits: 64, pkg: pkg, names: map[string]bool{}}
}

// AddLimit adds a limit of limiter keyed by key to s, with its options
// (the package's LimitOption values). keyKinds names the package's key
// constructors, for the error about a zero Key.
func AddLimit[R any, O ~func(*Limit[R])](s *Settings[R], limiter *sluice.Limiter, key KeyFunc[R], keyKinds string, opts ...O) error {
	if limiter == nil {
		return fmt.Errorf("%s: Limit: limiter is nil", s.pkg)
	}
	p := limiter.Policy()
	if key == nil {
		return fmt.Errorf("%s: Limit %q: key is the zero Key; use %s", s.pkg, p.Name, keyKinds)
	}
	if s.names[p.Name] {
		return fmt.Errorf("%s: Limit %q: two limits share the policy name, and with it their counters", s.pkg, p.Name)
	}
	s.names[p.Name] = true
	l := Limit[R]{Limiter: limiter, Policy: p, Key: key}
	for _, o := range opts {
		o(&l)
	}
	s.Limits = append(s.Limits, l)
	return nil
}

// SetRetryJitter sets the WithRetryJitter option.
func (s *Settings[R]) SetRetryJitter(max time.Duration) error {
	if max < 0 {
		return fmt.Errorf("%s: WithRetryJitter: negative bound %v", s.pkg, max)
	}
	s.Jitter = max
	return nil
}

// SetMaxDelay sets the WithMaxDelay option.
func (s *Settings[R]) SetMaxDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s: WithMaxDelay: negative %v", s.pkg, d)
	}
	s.MaxDelay = d
	return nil
}

// SetIPv6Prefix sets the WithIPv6Prefix option.
func (s *Settings[R]) SetIPv6Prefix(bits int) error {
	if bits < 1 || bits > 128 {
		return fmt.Errorf("%s: WithIPv6Prefix: %d bits, want 1 to 128", s.pkg, bits)
	}
	s.V6Bits = bits
	return nil
}

// errNoLimits is New's error without the package name.
var errNoLimits = errors.New("New: no limits; add one with Limit")
