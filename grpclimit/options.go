package grpclimit

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/limitcore"
)

// DefaultMaxDelay is how long a call waits at most for a leaky bucket's Delay
// unless WithMaxDelay says otherwise.
const DefaultMaxDelay = httplimit.DefaultMaxDelay

// Quota is one limit and the Result it gave (sluice.Quota), as in package
// httplimit.
type Quota = sluice.Quota

// ShadowDenial reports that a shadow limit would have denied a call; see
// httplimit.ShadowDenial.
type ShadowDenial = httplimit.ShadowDenial

// Option configures an Interceptor; pass options to New.
type Option func(*config) error

// LimitOption configures one limit; pass them to Limit.
type LimitOption func(*limit)

// config is the options shared with httplimit (limitcore.Settings) and the
// interceptor's own.
type config struct {
	limitcore.Settings[*call]
	cost     func(ctx context.Context, fullMethod string) int64
	onError  func(ctx context.Context, fullMethod string, err error) error
	onShadow func(ctx context.Context, fullMethod string, d ShadowDenial)
}

type limit = limitcore.Limit[*call]

// Limit adds a limit: every call is counted by limiter under the key that key
// derives from it. All the enforced limits are checked together, all or
// nothing (sluice.AllowAll), so they must share one store, and each needs its
// own policy name. A call for which key yields no key (absent metadata) is not
// counted by this limit, unless WithFallbackKey says otherwise.
func Limit(limiter *sluice.Limiter, key Key, opts ...LimitOption) Option {
	return func(c *config) error {
		return limitcore.AddLimit(&c.Settings, limiter, key.get, "ByPeer, ByMetadata, ByMethod, ByFunc, Global or Keys", opts...)
	}
}

// WithFallbackKey keys the calls that the limit's own key has no key for by k
// instead, e.g. WithFallbackKey(ByPeer()). The two kinds of keys are kept apart.
func WithFallbackKey(k Key) LimitOption { return func(l *limit) { l.Fallback = k.get } }

// WithShadow puts one limit in shadow mode: decided and reported (WithShadowDenialHandler)
// but never enforced, and not sent to clients. It is charged only for calls
// the enforced limits admit, and peeked at (cost 0) otherwise.
func WithShadow() LimitOption { return func(l *limit) { l.Shadow = true } }

// WithShadowAll puts every limit in shadow mode (see WithShadow).
func WithShadowAll() Option { return func(c *config) error { c.ShadowAll = true; return nil } }

// WithShadowDenialHandler sets the function called each time a shadow limit would have
// denied a call. The default logs a line at level Warn.
func WithShadowDenialHandler(f func(ctx context.Context, fullMethod string, d ShadowDenial)) Option {
	return func(c *config) error { c.onShadow = f; return nil }
}

// WithIPv6Prefix sets how many leading bits of an IPv6 peer address ByPeer keys on
// (1 to 128; default 64).
func WithIPv6Prefix(bits int) Option {
	return func(c *config) error { return c.SetIPv6Prefix(bits) }
}

// WithCost sets the function that says how many units a call costs on every
// limit (default 1). A cost of 0 only peeks: the call is admitted while
// every limit has a unit left and consumes nothing, the check before work
// whose real cost you charge afterwards with sluice.Limiter.Charge.
func WithCost(f func(ctx context.Context, fullMethod string) int64) Option {
	return func(c *config) error { c.cost = f; return nil }
}

// WithErrorHandler sets what a call whose limits could not be checked (the store
// failed, a key function returned an error, the cost is invalid) returns to
// the client. The default logs the error and returns codes.Unavailable, or
// codes.ResourceExhausted without RetryInfo for a cost above a limit's
// capacity, which no retry can fix.
func WithErrorHandler(f func(ctx context.Context, fullMethod string, err error) error) Option {
	return func(c *config) error { c.onError = f; return nil }
}

// WithLogger sets the logger of the default error and shadow handlers
// (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option { return func(c *config) error { c.Logger = l; return nil } }

// WithRetryJitter adds a random delay of up to max to every advertised retry
// delay, so that clients denied together do not return together. It only ever
// adds time.
func WithRetryJitter(max time.Duration) Option {
	return func(c *config) error { return c.SetRetryJitter(max) }
}

// WithMaxDelay bounds how long a call admitted by a leaky bucket waits for its
// Delay before the handler runs (default DefaultMaxDelay); see
// httplimit.WithMaxDelay, whose rules it follows. WithMaxDelay(0) turns shaping off.
func WithMaxDelay(d time.Duration) Option {
	return func(c *config) error { return c.SetMaxDelay(d) }
}

// WithMetadataOnDenialOnly sends the rate-limit metadata on denials only.
func WithMetadataOnDenialOnly() Option { return func(c *config) error { c.Quiet = true; return nil } }
