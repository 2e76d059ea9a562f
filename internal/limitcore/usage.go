package limitcore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice"
)

// ParseUsage reads the usage a response reports in header name: its value
// as a header, else as a trailer sent after the body (the value under
// http.TrailerPrefix+name, or a declared trailer, which the handler's
// Header holds under its own name). found is false when it is in neither.
// The value must be one non-negative decimal integer, digits only, that
// fits an int64: anything else (a sign, spaces, a unit, two values) is an
// error, so that a bad report never charges a guess.
func ParseUsage(h http.Header, name string) (n int64, found bool, err error) {
	vs := h.Values(name)
	if len(vs) == 0 {
		vs = h.Values(http.TrailerPrefix + name)
	}
	return ParseUsageValues("header", name, vs)
}

// ParseUsageValues reads the usage in vs, the values of what (a "header", a
// "trailer") name: found is false when there is none, and the one value
// there may be must be as ParseUsage says.
func ParseUsageValues(what, name string, vs []string) (n int64, found bool, err error) {
	if len(vs) == 0 {
		return 0, false, nil
	}
	if len(vs) > 1 {
		return 0, true, fmt.Errorf("%s %s: %d values; want one", what, name, len(vs))
	}
	n, err = parseDigits(vs[0])
	if err != nil {
		return 0, true, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return n, true, nil
}

var errNotCount = errors.New("want a non-negative integer such as 15")

func parseDigits(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%q: %w", s, errNotCount)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q: %w", s, errNotCount)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, errNotCount) // above the int64 range
	}
	return n, nil
}

// Charge charges, for every limit with a Usage, what r's ended request
// used to the key r has under that limit (shadow limits too: they count
// what would have been counted), with Limiter.Charge. It is made even when
// ctx has ended (the client went away: its usage happened anyway). A usage
// that cannot be read, or a charge that fails, is logged: the response is
// already sent, and nothing is charged for it.
func (c *Core[R]) Charge(ctx context.Context, r R) {
	if !c.charges {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, ls := range [][]Limit[R]{c.Enforced, c.Shadowed} {
		for i := range ls {
			c.chargeLimit(ctx, &ls[i], r)
		}
	}
}

func (c *Core[R]) chargeLimit(ctx context.Context, l *Limit[R], r R) {
	if l.Usage == nil {
		return
	}
	key, err := c.keyFor(l, r)
	if err != nil || key == "" {
		return // the limit did not apply to the request: nothing was checked
	}
	lim, _, err := c.limiterFor(l, r)
	if err != nil {
		return // the request was refused for it, so it was never handled
	}
	n, err := l.Usage(r)
	if err != nil {
		c.Logger.WarnContext(ctx, c.pkg+": the response's usage cannot be read; nothing is charged", "policy", l.Policy.Name, "err", err)
		return
	}
	if n == 0 {
		return
	}
	if _, err := lim.Charge(ctx, key, n); err != nil {
		c.Logger.ErrorContext(ctx, c.pkg+": charging the response's usage failed", "policy", l.Policy.Name, "cost", n, "err", err)
	}
}

// checkUsage refuses a charge on a limit that cannot take one.
func checkUsage[R any](pkg string, l *Limit[R]) error {
	if l.Usage != nil && l.Policy.Algorithm == sluice.Concurrency {
		return fmt.Errorf("%s: limit %q: a concurrency limit counts requests in flight and cannot be charged usage", pkg, l.Policy.Name)
	}
	return nil
}
