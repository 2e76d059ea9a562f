package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/limitcore"
)

// DefaultMaxDelay is how long a request waits at most for a leaky bucket's
// Delay unless WithMaxDelay says otherwise.
const DefaultMaxDelay = limitcore.DefaultMaxDelay

// Option configures a Middleware; pass options to New.
type Option func(*config) error

// LimitOption configures one limit; pass them to Limit.
type LimitOption func(*limit)

// config is the options shared with grpclimit (limitcore.Settings) and the
// middleware's own.
type config struct {
	limitcore.Settings[*request]
	trusted   []netip.Prefix
	ipHeaders []string
	cost      func(*http.Request) int64
	onDeny    DenyHandler
	onError   ErrorHandler
	onShadow  func(*http.Request, ShadowDenial)
	legacy    bool
}

// limit is one Limit option: a limiter and how to key requests for it.
type limit = limitcore.Limit[*request]

// Limit adds a limit: every request is counted by limiter under the key that
// key derives from it. All the enforced limits of a Middleware are checked
// together, all or nothing (sluice.AllowAll): a request denied by one limit
// consumes nothing on the others. So they must share one store, and each
// needs its own policy name.
//
// A request for which key yields no key (a missing header) is not counted by
// this limit at all, unless WithFallbackKey says otherwise: the per-key limit
// cannot tell such requests apart, and lumping them into one bucket would let
// one of them starve the rest. Add a Global limit, or a fallback, to bound them.
func Limit(limiter *sluice.Limiter, key Key, opts ...LimitOption) Option {
	return func(c *config) error {
		return limitcore.AddLimit(&c.Settings, limiter, key.get, "ByIP, ByHeader, ByFunc, Global or Keys", opts...)
	}
}

// WithFallbackKey keys the requests that the limit's own key has no key for
// (say, no X-API-Key header) by k instead, e.g. WithFallbackKey(ByIP()). The two
// kinds of keys are kept apart, so a header value can never name a fallback
// bucket.
func WithFallbackKey(k Key) LimitOption { return func(l *limit) { l.Fallback = k.get } }

// WithPlan decides each request of the limit by the limiter pick returns for it
// (nil: the limit's own): one of the policy's plans, which must keep the
// policy's name and algorithm, and so its state, under another limit. A
// request whose plan cannot be told (no header, an unknown plan) should get
// nil, and with it the limit's own limiter, so that nothing a client sends
// escapes the limit. The RateLimit fields then advertise the limit applied.
func WithPlan(pick func(*http.Request) *sluice.Limiter) LimitOption {
	return func(l *limit) {
		l.Pick = func(r *request) *sluice.Limiter { return pick(r.Request) }
	}
}

// WithShadow puts one limit in shadow mode: its decisions are computed and
// reported (see WithShadowDenialHandler) but never enforced, and its fields are not
// sent to clients, who must not slow down for a limit that does not exist
// yet. Use it to try a new limit on real traffic.
//
// A shadow limit is decided apart from the enforced ones, after them: it is
// charged when the request is admitted, and only peeked at (cost 0) when the
// enforced limits deny it, because a denied request consumes nothing.
func WithShadow() LimitOption { return func(l *limit) { l.Shadow = true } }

// WithShadowAll puts every limit in shadow mode (see WithShadow).
func WithShadowAll() Option {
	return func(c *config) error { c.ShadowAll = true; return nil }
}

// WithShadowDenialHandler sets the function called each time a shadow limit would
// have denied a request, to count or log it. It runs on the request's
// goroutine, before the request is handled. The default logs a line at level
// Warn with the policy and the retry delay.
func WithShadowDenialHandler(f func(r *http.Request, d ShadowDenial)) Option {
	return func(c *config) error { c.onShadow = f; return nil }
}

// WithTrustedProxies lists the proxies (addresses or CIDR prefixes, such as
// "10.0.0.0/8" or "::1") whose report of the client address is believed:
// only a request whose immediate peer is one of them has its client address
// read from the headers of WithClientIPHeaders. Without it, the client is always
// the peer, as any client can write those headers.
func WithTrustedProxies(cidrs ...string) Option {
	return func(c *config) error {
		trusted, err := TrustedPrefixes(cidrs...)
		if err != nil {
			return fmt.Errorf("httplimit: WithTrustedProxies: %w", err)
		}
		c.trusted = append(c.trusted, trusted...)
		return nil
	}
}

// TrustedPrefixes parses trusted proxies as TrustedProxies does (a bare
// address is a prefix of its own; an IPv4-mapped prefix is unmapped, since
// ClientIP compares addresses unmapped), for the trusted argument of
// ClientIP.
func TrustedPrefixes(cidrs ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		s = a.String() + "/" + fmt.Sprint(a.BitLen())
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	// Client addresses are compared unmapped, so an IPv4-mapped prefix must be
	// unmapped too or it would never match.
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// WithClientIPHeaders names the header fields the trusted proxies use to report
// the client, most preferred first; the first one present in a request is
// read (see ClientIP for how). The default is X-Forwarded-For alone.
//
// Name only fields your proxies set or overwrite: a field they pass through
// untouched is written by the client. A proxy that appends to
// X-Forwarded-For but forwards a client's Forwarded field as it is would let
// any client choose its address if Forwarded were listed here.
func WithClientIPHeaders(names ...string) Option {
	return func(c *config) error {
		if len(names) == 0 {
			return errors.New("httplimit: WithClientIPHeaders: no header names")
		}
		c.ipHeaders = c.ipHeaders[:0]
		for _, n := range names {
			c.ipHeaders = append(c.ipHeaders, http.CanonicalHeaderKey(n))
		}
		return nil
	}
}

// WithIPv6Prefix sets how many leading bits of an IPv6 client address ByIP keys
// on (1 to 128; the default is 64, the usual assignment to one subscriber).
func WithIPv6Prefix(bits int) Option {
	return func(c *config) error { return c.SetIPv6Prefix(bits) }
}

// WithCost sets the function that says how many units a request costs on every
// limit (the default is 1). A cost of 0 only peeks: the request is admitted
// while every limit has a unit left and consumes nothing, the check before
// work whose real cost (tokens, bytes) you charge afterwards with
// sluice.Limiter.Charge. A cost above a limit's capacity can never be
// admitted and fails with sluice.ErrExceedsCapacity (see WithErrorHandler).
func WithCost(f func(*http.Request) int64) Option {
	return func(c *config) error { c.cost = f; return nil }
}

// WithDenyHandler replaces the response to a denied request (by default a
// problem+json body, see WriteDenial). The rate-limit fields, Retry-After and
// Cache-Control: no-store are set before h runs; h writes the status and the
// body.
func WithDenyHandler(h DenyHandler) Option {
	return func(c *config) error { c.onDeny = h; return nil }
}

// WithErrorHandler replaces the response to a request whose limits could not be
// checked: the store failed, a key function returned an error, or the cost
// is invalid. The default logs the error and answers 503 (413 for a cost
// above a limit's capacity, which no retry can fix) with a problem+json body.
func WithErrorHandler(h ErrorHandler) Option {
	return func(c *config) error { c.onError = h; return nil }
}

// WithLogger sets the logger of the default error and shadow handlers
// (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.Logger = l; return nil }
}

// WithRetryJitter adds a random delay of up to max to every Retry-After, so that
// clients denied together do not all come back at the same instant. It only
// ever adds time: a client never returns before it would be admitted.
func WithRetryJitter(max time.Duration) Option {
	return func(c *config) error { return c.SetRetryJitter(max) }
}

// WithMaxDelay bounds how long a request admitted by a leaky bucket waits for its
// Delay before it is passed on (default DefaultMaxDelay). A request whose
// Delay is longer waits d and then proceeds: the store has already counted
// it, so turning it away would waste its slot without relieving the queue,
// and the long-run rate still holds — only that request's spacing is lost.
// To keep the spacing exact, size the bucket so that Burst × Period/Limit is
// at most d; WithMaxDelay(0) turns shaping off. The wait also ends, without
// calling the handler, when the request's context is done.
func WithMaxDelay(d time.Duration) Option {
	return func(c *config) error { return c.SetMaxDelay(d) }
}

// WithHeadersOnDenialOnly sends RateLimit-Policy and RateLimit (and the legacy
// fields) on denials only, not on every allowed response.
func WithHeadersOnDenialOnly() Option {
	return func(c *config) error { c.Quiet = true; return nil }
}

// WithLegacyHeaders also sends X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (seconds from now). They describe one limit, so with
// several the most restrictive is reported: the one with the fewest units
// remaining.
func WithLegacyHeaders() Option {
	return func(c *config) error { c.legacy = true; return nil }
}
