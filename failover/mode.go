package failover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Mode is the fail policy: what a Store does with a decision its primary
// store could not make.
type Mode int

const (
	// FailOpen admits the request without counting it: unbounded while the
	// primary is away.
	FailOpen Mode = iota
	// FailClosed denies it: the call returns an *UnavailableError.
	FailClosed
	// FailLocal decides it on a local in-process store, with each limit
	// divided by the number of nodes (the default of New).
	FailLocal
)

func (m Mode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	case FailLocal:
		return "local"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "open", "closed" or "local".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{FailOpen, FailClosed, FailLocal} {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("failover: unknown fail policy %q (want open, closed or local)", s)
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
