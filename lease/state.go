package lease

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// lease is one (policy, key)'s quota on this node. Its fields are guarded by mu.
type lease struct {
	mu      sync.Mutex
	id      leaseID
	policy  sluice.Policy
	key     string
	retired bool // removed from the store's map: callers take a new one

	res       sluice.Reservation // the current reservation
	left      int64              // its unspent units
	start     int64              // node clock (µs) read before the reservation
	expires   int64              // the lease ends (TTL, or its window's end)
	windowEnd int64              // fixed_window: end of the window holding the units
	resetAt   int64              // when the store's state resets, as last seen

	seenLeft int64 // what the store had left at the last answer (-1: unknown)
	seenAt   int64 // node clock of that answer

	size   int64 // the rate-driven size of the next reservation
	sized  bool  // size already adapted to how the current lease went
	waited bool  // the node waited after a denial for size units to refill

	denial      sluice.Result // the store's last denial, answered locally until deniedUntil
	deniedUntil int64
	deniedCost  int64
}

// nextSize is the size of the reservation to make now for a request of cost:
// the rate-driven size (doubled when the lease ran out before its end, else
// what the lease used), at most maxLease, and at most a quarter of what the
// store has left (so near the limit leases shrink to single units) — but
// never below cost.
func (l *lease) nextSize(cost, now, maxLease int64) int64 {
	if l.res.Granted > 0 && !l.sized {
		l.sized = true
		if now < l.expires {
			l.size *= 2 // spent before its end: the node's rate is higher
		} else {
			l.size = l.res.Granted - l.left // what one lease lifetime used
		}
	}
	l.size = min(max(1, l.size), maxLease)
	size := l.size
	if left, ok := l.globalLeft(now); ok && !l.waited {
		size = min(size, left/4)
	}
	return max(cost, size)
}

// globalLeft estimates what the store has left now from its last answer: the
// same within a fixed window, refilled by the elapsed time for the buckets.
func (l *lease) globalLeft(now int64) (int64, bool) {
	if l.seenAt == 0 {
		return 0, false
	}
	if l.policy.Algorithm == sluice.FixedWindow {
		if now >= l.windowEnd {
			return 0, false
		}
		return l.seenLeft, true
	}
	refill := (now - l.seenAt) / l.policy.EmissionInterval().Microseconds()
	return min(l.policy.Capacity(), l.seenLeft+refill), true
}

// install makes r the current lease, reserved at now (read before the call).
func (l *lease) install(r sluice.Reservation, now int64, ttl time.Duration) {
	l.res, l.left, l.start, l.sized = r, r.Granted, now, false
	l.expires = now + ttl.Microseconds()
	l.resetAt = now + r.Result.ResetAfter.Microseconds()
	if l.policy.Algorithm == sluice.FixedWindow {
		// ResetAfter is the window's end counted from the store's instant,
		// which is no earlier than now: the lease ends no later than its window.
		l.windowEnd = l.resetAt
		l.expires = min(l.expires, l.windowEnd)
	}
	l.seenLeft, l.seenAt = r.Result.Remaining, now
	l.deniedUntil, l.waited = 0, false
}

// deny remembers the store's denial of cost at now, asking for size units.
// A fixed window is denied until the next one opens. A bucket is asked again
// once size units have refilled, not one: at saturation a node then makes one
// store call per lease instead of one per unit, and the bucket, which keeps
// filling meanwhile (size ≤ B/10 by default), loses nothing.
func (l *lease) deny(r sluice.Reservation, cost, size, now int64) {
	l.denial, l.deniedCost = r.Result, cost
	wait := r.Result.RetryAfter.Microseconds()
	if l.policy.Algorithm != sluice.FixedWindow {
		wait += max(0, size-cost) * l.policy.EmissionInterval().Microseconds()
	}
	l.deniedUntil = now + wait
	l.waited = true
	l.resetAt = now + r.Result.ResetAfter.Microseconds()
	l.seenLeft, l.seenAt = r.Result.Remaining, now
	if l.policy.Algorithm == sluice.FixedWindow {
		l.windowEnd = l.deniedUntil // a fixed window denies until the next one
	}
}

// admitted is the Result of a request admitted from the lease.
func (l *lease) admitted(now int64) sluice.Result {
	left, _ := l.globalLeft(now)
	return sluice.Result{
		Allowed:    true,
		Limit:      l.policy.Limit,
		Remaining:  min(l.policy.Capacity(), l.left+left),
		ResetAfter: micros(max(0, l.resetAt-now)),
	}
}

// denied is the remembered denial as seen at now.
func (l *lease) denied(now int64) sluice.Result {
	res := l.denial
	res.RetryAfter = micros(l.deniedUntil - now)
	res.ResetAfter = micros(max(0, l.resetAt-now))
	return res
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
