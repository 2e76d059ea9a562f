package failover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Mode is the fail policy: what a Store does with a decision its primary
// store could not make. Its zero value is FailLocal, the default of New.
type Mode int

const (
	// FailLocal decides it on a local in-process store, with each limit
	// divided by the number of nodes given by WithNodes (the default of New,
	// and Mode's zero value). Without WithNodes every node admits the whole
	// limit on its own: N nodes falling back at once admit N × the limit.
	FailLocal Mode = iota
	// FailClosed denies it: the call returns an *UnavailableError.
	FailClosed
	// FailOpen admits the request without counting it: unbounded while the
	// primary is away.
	FailOpen
)

// String returns the name ParseMode parses: "local", "closed" or "open"
// (also the fail policy's label in metrics and traces).
func (m Mode) String() string {
	switch m {
	case FailLocal:
		return "local"
	case FailClosed:
		return "closed"
	case FailOpen:
		return "open"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "local", "closed" or "open", in any case.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{FailLocal, FailClosed, FailOpen} {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return FailLocal, fmt.Errorf("failover: unknown fail policy %q (want local, closed or open)", s)
}

// ErrUnavailable is wrapped by the error of every call a FailClosed Store
// denies because the primary could not decide.
var ErrUnavailable = errors.New("failover: store unavailable")

// ErrBreakerOpen is the cause of calls not tried because the breaker is open.
var ErrBreakerOpen = errors.New("circuit breaker open")

// ErrTimeout is wrapped by the error of a call the Store stopped waiting for.
// It also wraps context.DeadlineExceeded.
var ErrTimeout = fmt.Errorf("store call timed out: %w", context.DeadlineExceeded)

// UnavailableError is a FailClosed Store's denial. errors.Is finds both
// ErrUnavailable and the cause in it.
type UnavailableError struct {
	// Cause is the primary's error, or ErrBreakerOpen.
	Cause error
	// RetryAfter is when the breaker next probes the primary: the earliest a
	// retry can be decided by it (0 when the breaker is closed).
	RetryAfter time.Duration
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%v (failing closed): %v", ErrUnavailable, e.Cause)
}

// Unwrap returns ErrUnavailable and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Cause} }
