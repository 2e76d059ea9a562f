package lease

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// lease is one (policy, key)'s quota on this node. Its fields are guarded by
// its shard's mu; its own mu (see keyLock) is held by the one caller
// reserving for the key (and by a sweep or Close giving the lease back),
// across the store calls.
type lease struct {
	mu      keyLock
	id      leaseID
	sh      *shard
	policy  sluice.Policy
	retired bool // removed from the shard's map: callers take a new one

	res       sluice.Reservation // the current reservation
	left      int64              // its unspent units
	spent     int64              // its units spent on requests (the rest were given back or expired)
	start     int64              // node clock (µs) read before the reservation
	expires   int64              // the lease ends (TTL, or its window's end)
	windowEnd int64              // fixed_window: end of the window holding the units
	resetAt   int64              // when the store's state resets, as last seen

	seenLeft int64 // what the store had left at the last answer (-1: unknown)
	seenAt   int64 // node clock of that answer

	demand demand // what the key asks for per TTL: whether to lease it, and how much
	saved  int64  // store calls its leases saved (local decisions) less the renewals and releases made

	denial      sluice.Result // the store's last denial, answered locally until deniedUntil
	deniedUntil int64
	short       int // bucket reservations in a row that came back short
	deniedCost  int64

	next       *pending // reserved ahead by a renewal; nil: none
	renewTried bool     // a renewal was started for the current lease
}

// local decides req from the lease alone when it can: an admission from its
// units, or the denial it remembers. false: a store call is needed (or the
// policy changed, and the lease must be given back first).
func (l *lease) local(req sluice.Request, now int64) (sluice.Result, bool) {
	if *req.Policy != l.policy {
		return sluice.Result{}, false
	}
	if l.left >= req.Cost && now < l.expires {
		l.left -= req.Cost
		l.spent += req.Cost
		return l.admitted(now), true
	}
	if now < l.deniedUntil && req.Cost >= l.deniedCost {
		return l.denied(now), true
	}
	return sluice.Result{}, false
}

// giveBack is what a lease hands back to the store: unused units of res.
type giveBack struct {
	policy sluice.Policy
	key    string
	res    sluice.Reservation
	at     int64 // node clock (µs) read before the reservation
	unused int64
}

// takeBack empties the lease and returns what to give back: nothing when its
// fixed window is over (the units expire with it).
func (l *lease) takeBack(now int64) giveBack {
	unused := l.left
	l.left = 0
	if unused <= 0 || l.policy.Algorithm == sluice.FixedWindow && now >= l.windowEnd {
		return giveBack{}
	}
	return giveBack{policy: l.policy, key: l.id.key, res: l.res, at: l.start, unused: unused}
}

// worth returns g when giving it back pays (shard locked), else nothing:
// the release surely restores a unit — a fixed window's units until the
// window ends (takeBack gives none after), a bucket's while less than their
// refill time has passed since the reservation (a refund keeps the refill
// since, as the bucket might have been full without the reservation: after
// unused·T it may restore nothing) — and the key's leases saved at least the
// call it costs (local decisions, less the renewals and releases made), or
// for a fixed window the units are likely to be asked for before it ends
// (filling).
// Units not given back stay consumed: under-admission of at most one lease
// (Stranded), never more admitted.
func (l *lease) worth(g giveBack, now int64) giveBack {
	if g.unused <= 0 {
		return giveBack{}
	}
	if g.policy.Algorithm != sluice.FixedWindow {
		if l.saved < 1 || now-g.at >= g.unused*g.policy.EmissionInterval().Microseconds() {
			return giveBack{}
		}
	} else if l.saved < 1 && !l.filling(now) {
		return giveBack{}
	}
	l.saved--
	return g
}

// filling reports whether a fixed window may reach its limit before it ends,
// by what it had used at the store's last answer (all nodes together) for
// the time it had been open: on course for three quarters of it or more,
// as a rate measured early in a window (a key turning warm, calls on their
// way) reads low. Then every unit counts, and one stranded is one another
// node is denied.
func (l *lease) filling(now int64) bool {
	P := l.policy.Period.Microseconds()
	opened := l.windowEnd - P
	if l.seenAt == 0 || now >= l.windowEnd || l.seenAt < opened {
		return false
	}
	used := l.policy.Limit - l.seenLeft
	return 4*float64(used)*float64(P) >= 3*float64(l.policy.Limit)*float64(max(1, l.seenAt-opened))
}

// settle decides a request of cost with the store's answer to a reservation
// of size units made at now: the store's error; a fail policy's degraded
// result, which installs no lease and no denial; a denial to remember; or a
// new lease, which pays the cost.
func (l *lease) settle(r sluice.Reservation, err error, cost, size, now int64, ttl time.Duration) (sluice.Result, error) {
	switch {
	case err != nil:
		return sluice.Result{}, err
	case r.Result.Degraded:
		return r.Result, nil
	case r.Granted == 0:
		l.deny(r, cost, size, now, ttl)
		return l.denied(now), nil
	}
	l.install(r, size, now, ttl)
	l.left -= cost
	l.spent += cost
	l.watch()
	return l.admitted(now), nil
}

// nextSize is the size of the reservation to make now for a request of
// cost: what the key is expected to ask for over the lease's lifetime (d,
// or for a fixed window what is left of the window if that is shorter) — at
// the rate it spent its last lease (units used ÷ how long the lease lasted)
// when it had one lately, else at its demand — at most what the key asked
// for so far while it has been seen for less than d (demand.most: a lease
// holds no more than the key is expected to use), at most maxLease, and for a
// fixed window at most a quarter of what the store has left (so near the
// limit leases shrink to single units, and few are stranded until the window
// ends); but never below cost. A bucket's lease takes what is left instead,
// and a partial grant makes the node wait for the rest to refill (see
// install).
func (l *lease) nextSize(cost, now, maxLease int64, ttl time.Duration) int64 {
	d := ttl.Microseconds()
	span, left, known := d, int64(0), false
	if l.policy.Algorithm == sluice.FixedWindow {
		if left, known = l.globalLeft(now); known {
			span = min(span, l.windowEnd-now)
		}
	}
	var size int64
	if l.res.Granted > 0 && now-l.expires < d {
		// The lease's own rate is the closest measure: the demand's sliding
		// window is an approximation, and near the limit a unit reserved
		// too many is a unit others are denied.
		used := float64(l.spent)
		lasted := float64(max(1, min(now, l.expires)-l.start))
		size = int64(math.Ceil(min(used*float64(span)/lasted, float64(l.demand.most(now)))))
	} else {
		size = l.demand.over(now, span)
	}
	if known {
		size = min(size, left/4)
	}
	return max(cost, min(size, maxLease))
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

// install makes r the current lease, reserved at now (read before the call)
// when asked units were asked for.
func (l *lease) install(r sluice.Reservation, asked, now int64, ttl time.Duration) {
	if r.Granted >= asked {
		l.short = 0
	}
	l.res, l.left, l.spent, l.start, l.renewTried = r, r.Granted, 0, now, false
	l.expires = now + ttl.Microseconds()
	l.resetAt = now + r.Result.ResetAfter.Microseconds()
	if l.policy.Algorithm == sluice.FixedWindow {
		// ResetAfter is the window's end counted from the store's instant,
		// which is no earlier than now: the lease ends no later than its window.
		l.windowEnd = l.resetAt
		l.expires = min(l.expires, l.windowEnd)
	}
	l.seenLeft, l.seenAt = r.Result.Remaining, now
	l.deniedUntil = 0
	if l.policy.Algorithm != sluice.FixedWindow && r.Granted < asked {
		// The bucket is saturated: once this lease is spent, deny locally
		// until the rest of the asked lease has refilled, so a saturated node
		// makes one store call per lease, not one per unit.
		l.denial = sluice.Result{Limit: l.policy.Limit, ResetAfter: r.Result.ResetAfter}
		l.deniedCost = 1
		l.deniedUntil = now + l.backoff((asked-r.Granted)*l.policy.EmissionInterval().Microseconds(), ttl)
	}
}

// backoff is how long a bucket's node waits after a reservation that came
// back short: the refill it asked for, doubled for each short one in a row
// (others took the refill first), at most a TTL. The bucket keeps the credit
// meanwhile, and refills by at most d/T ≤ B/20 units (default d) in a TTL, so
// the waiting loses nothing.
func (l *lease) backoff(wait int64, ttl time.Duration) int64 {
	l.short = min(l.short+1, 20)
	return max(wait, min(ttl.Microseconds(), wait<<(l.short-1)))
}

// deny remembers the store's denial of cost at now, asking for size units.
// A fixed window is denied until the next one opens. A bucket is asked again
// once size units have refilled, not one: at saturation a node then makes one
// store call per lease instead of one per unit, and the bucket, which keeps
// filling meanwhile (size ≤ B/10 by default), loses nothing.
func (l *lease) deny(r sluice.Reservation, cost, size, now int64, ttl time.Duration) {
	l.denial, l.deniedCost = r.Result, cost
	wait := r.Result.RetryAfter.Microseconds()
	if l.policy.Algorithm != sluice.FixedWindow {
		wait = l.backoff(wait+max(0, size-cost)*l.policy.EmissionInterval().Microseconds(), ttl)
	}
	l.deniedUntil = now + wait
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
