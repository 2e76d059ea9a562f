package failover

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is the circuit breaker's state.
type BreakerState int32

const (
	// BreakerClosed: calls go to the primary store.
	BreakerClosed BreakerState = iota
	// BreakerOpen: the primary failed repeatedly; calls are decided by the
	// fail policy without trying it, until the cool-down ends.
	BreakerOpen
	// BreakerHalfOpen: the cool-down is over and one call is probing the
	// primary; the others still go to the fail policy.
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// breaker counts consecutive failures. The closed state, the hot path, costs
// two atomic loads per call; transitions take the mutex.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	onChange  func(from, to BreakerState)

	state    atomic.Int32
	failures atomic.Int32
	retryAt  atomic.Int64 // unix ns after which an open breaker admits a probe

	mu sync.Mutex // serialises transitions
}

// allow reports whether a call may go to the primary, and whether that call
// is the half-open probe.
// The clock is read only when the breaker is open: the closed state, every
// healthy call, needs no time.
func (b *breaker) allow(clock interface{ Now() time.Time }) (call, probe bool) {
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if clock.Now().UnixNano() < b.retryAt.Load() {
			return false, false
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if BreakerState(b.state.Load()) != BreakerOpen {
			return false, false // another call became the probe
		}
		b.set(BreakerHalfOpen)
		return true, true
	default:
		return false, false
	}
}

// success records a call the primary answered. Any answer, even one to a call
// begun before the breaker opened, shows the primary is back.
func (b *breaker) success() {
	if BreakerState(b.state.Load()) == BreakerClosed {
		if b.failures.Load() != 0 {
			b.failures.Store(0) // only written when needed: the line stays shared
		}
		return
	}
	b.mu.Lock()
	b.failures.Store(0)
	b.set(BreakerClosed)
	b.mu.Unlock()
}

// failure records a call the primary failed.
func (b *breaker) failure(now time.Time, probe bool) {
	if probe {
		b.mu.Lock()
		b.open(now)
		b.mu.Unlock()
		return
	}
	if b.failures.Add(1) < b.threshold || BreakerState(b.state.Load()) != BreakerClosed {
		return
	}
	b.mu.Lock()
	if BreakerState(b.state.Load()) == BreakerClosed {
		b.open(now)
	}
	b.mu.Unlock()
}

// release gives up a probe whose caller went away before it was answered:
// the next call probes instead.
func (b *breaker) release(now time.Time) {
	b.mu.Lock()
	if BreakerState(b.state.Load()) == BreakerHalfOpen {
		b.retryAt.Store(now.UnixNano())
		b.set(BreakerOpen)
	}
	b.mu.Unlock()
}

// retryIn is how long until an open breaker lets a probe through.
func (b *breaker) retryIn(now time.Time) time.Duration {
	if BreakerState(b.state.Load()) == BreakerClosed {
		return 0
	}
	return max(0, time.Duration(b.retryAt.Load()-now.UnixNano()))
}

func (b *breaker) open(now time.Time) {
	b.retryAt.Store(now.Add(b.cooldown).UnixNano())
	b.set(BreakerOpen)
}

// set changes the state; b.mu is held.
func (b *breaker) set(to BreakerState) {
	from := BreakerState(b.state.Swap(int32(to)))
	if from != to && b.onChange != nil {
		b.onChange(from, to)
	}
}
