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
	// BreakerOpen: too many recent calls failed; calls are decided by the
	// fail policy without trying the primary, until the cool-down ends.
	BreakerOpen
	// BreakerHalfOpen: the cool-down is over and a few calls probe the
	// primary; the others still go to the fail policy.
	BreakerHalfOpen
)

// String returns closed, open or half_open: the names logs, metrics and
// /readyz use.
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "unknown"
}

// Breaker defaults.
const (
	// DefaultMinCalls is the breaker's window: it judges the outcomes of the
	// last DefaultMinCalls calls, and never fewer.
	DefaultMinCalls = 20
	// DefaultWindow is how long a failure counts: older ones are forgotten,
	// so that on a quiet node failures hours apart do not add up.
	DefaultWindow = 10 * time.Second
	// DefaultFailureRate is the share of failed calls in the window that
	// opens the breaker.
	DefaultFailureRate = 0.5
	// DefaultCooldown is how long an open breaker waits before probing.
	// Recovery is noticed within about this long after the primary is back.
	DefaultCooldown = time.Second
	// DefaultProbes is how many calls a half_open breaker lets through; all
	// must succeed to close it.
	DefaultProbes = 3
)

// ticket is what allow hands a call: its place in the order calls started,
// and whether it is a half_open probe.
type ticket struct {
	seq   uint64
	probe bool
}

// breaker opens on a failure rate: at least rate of the last window outcomes
// failed, counting the failures of the last age. Failures of calls that were in flight together count once: when a
// failure is recorded, every call already started belongs to the same event
// (one stall of the primary times out everything queued on it), and only a
// call started later can add another failure.
//
// The closed state's hot path costs an atomic add per call and, while the
// window holds no failure, two atomic loads per success; the rest takes the
// mutex.
type breaker struct {
	window   int
	age      time.Duration
	rate     float64
	cooldown time.Duration
	probes   int
	onChange func(from, to BreakerState)

	state   atomic.Int32
	seq     atomic.Uint64 // calls started
	clean   atomic.Bool   // the window is full of successes: a success changes nothing
	retryAt atomic.Int64  // unix ns after which an open breaker admits probes

	mu       sync.Mutex // guards what follows and serialises transitions
	ring     []int64    // outcomes: 0 for a success, else the failure's unix ns
	next     int
	filled   int
	failures int
	lastFail uint64 // calls started up to here share the last counted failure
	permits  int    // probes handed out while half_open
	passed   int    // probes that succeeded
}

func newBreaker() breaker {
	return breaker{window: DefaultMinCalls, age: DefaultWindow, rate: DefaultFailureRate, cooldown: DefaultCooldown, probes: DefaultProbes}
}

// allow reports whether a call may go to the primary, with its ticket.
// The clock is read only when the breaker is open.
func (b *breaker) allow(clock interface{ Now() time.Time }) (bool, ticket) {
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return true, ticket{seq: b.seq.Add(1)}
	case BreakerOpen:
		if clock.Now().UnixNano() < b.retryAt.Load() {
			return false, ticket{}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch BreakerState(b.state.Load()) {
	case BreakerClosed: // closed meanwhile
		return true, ticket{seq: b.seq.Add(1)}
	case BreakerOpen:
		b.permits, b.passed = 0, 0
		b.set(BreakerHalfOpen)
	}
	if b.permits >= b.probes {
		return false, ticket{}
	}
	b.permits++
	return true, ticket{seq: b.seq.Add(1), probe: true}
}

// success records a call the primary answered.
func (b *breaker) success(t ticket) {
	if !t.probe {
		if b.clean.Load() || BreakerState(b.state.Load()) != BreakerClosed {
			// Nothing to change; or a call begun before the breaker opened,
			// which says nothing the probes will not say.
			return
		}
		b.mu.Lock()
		if BreakerState(b.state.Load()) == BreakerClosed {
			b.push(0)
		}
		b.mu.Unlock()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if BreakerState(b.state.Load()) != BreakerHalfOpen {
		return
	}
	if b.passed++; b.passed >= b.probes {
		b.reset()
		b.set(BreakerClosed)
	}
}

// failure records a call the primary failed, and reports whether it counted
// (false: it shared the failure of a call in flight with it).
func (b *breaker) failure(t ticket, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch BreakerState(b.state.Load()) {
	case BreakerHalfOpen:
		if t.probe {
			b.open(now)
		}
		return t.probe
	case BreakerOpen:
		return false
	}
	if t.seq <= b.lastFail {
		return false
	}
	b.lastFail = b.seq.Load()
	b.push(now.UnixNano())
	if b.filled >= b.window && float64(b.recent(now)) >= b.rate*float64(b.window) {
		b.open(now)
	}
	return true
}

// release gives back a probe whose caller went away before it was answered,
// so that another call can probe instead.
func (b *breaker) release(t ticket) {
	if !t.probe {
		return
	}
	b.mu.Lock()
	if BreakerState(b.state.Load()) == BreakerHalfOpen && b.permits > 0 {
		b.permits--
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

// recent counts the failures in the window younger than b.age; b.mu is held.
func (b *breaker) recent(now time.Time) int {
	if b.failures == 0 {
		return 0
	}
	since, n := now.Add(-b.age).UnixNano(), 0
	for _, at := range b.ring[:b.filled] {
		if at != 0 && at >= since {
			n++
		}
	}
	return n
}

// push adds an outcome to the window, 0 for a success; b.mu is held.
func (b *breaker) push(failedAt int64) {
	if b.ring == nil {
		b.ring = make([]int64, b.window)
	}
	if b.filled == b.window {
		if b.ring[b.next] != 0 {
			b.failures--
		}
	} else {
		b.filled++
	}
	b.ring[b.next] = failedAt
	if failedAt != 0 {
		b.failures++
	}
	b.next = (b.next + 1) % b.window
	b.clean.Store(b.filled == b.window && b.failures == 0)
}

// reset empties the window; b.mu is held.
func (b *breaker) reset() {
	clear(b.ring)
	b.next, b.filled, b.failures = 0, 0, 0
	b.lastFail = b.seq.Load()
	b.clean.Store(false)
}

func (b *breaker) open(now time.Time) {
	b.retryAt.Store(now.Add(b.cooldown).UnixNano())
	b.reset()
	b.set(BreakerOpen)
}

// set changes the state; b.mu is held.
func (b *breaker) set(to BreakerState) {
	from := BreakerState(b.state.Swap(int32(to)))
	if from != to && b.onChange != nil {
		b.onChange(from, to)
	}
}
