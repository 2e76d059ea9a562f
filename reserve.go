package sluice

import (
	"context"
	"errors"
)

// ErrNotReservable is returned by a Reserver asked to reserve under a policy
// whose algorithm cannot be reserved (see Reservable).
var ErrNotReservable = errors.New("sluice: the algorithm cannot be reserved")

// Reservation is what a Reserver granted: Granted units consumed at once, as
// if admitted by one decision, for a caller (a lease) to spend later.
type Reservation struct {
	// Granted is 0 (nothing was consumed) or between the request's Cost and
	// the upper bound asked for.
	Granted int64
	// Result is the store's answer for the admission of Granted units; when
	// Granted is 0 it is exactly the denial Decide gives the request. With
	// Result.Degraded set, a fail policy decided the request instead of the
	// store (package failover): Granted is then the request's Cost or 0, and
	// nothing is held in the store to spend later or give back.
	Result Result
	// Ref1 and Ref2 say what Release needs to give units back (the window's
	// start for fixed_window, the refill time for token_bucket, the TAT and
	// the instant for gcra). They are the store's own business.
	Ref1, Ref2 int64
}

// Reserver is implemented by stores that can reserve quota in one call: take
// as many units as the policy admits now, between a minimum and a maximum,
// and later give back what was not used. Package lease builds local decisions
// on it. Only the algorithms Reservable accepts can be reserved.
type Reserver interface {
	Store
	// Reserve admits between req.Cost and upTo units of (req.Policy, req.Key)
	// at one instant: all of upTo when the policy admits them, else as many
	// as it admits, else (fewer than req.Cost) nothing.
	Reserve(ctx context.Context, req Request, upTo int64) (Reservation, error)
	// Release gives back unused of the units r granted (unused ≤ r.Granted).
	// Units whose window has ended, or whose credit the bucket has already
	// refilled, are not given back: a release never admits more than the
	// policy would have without the reservation.
	Release(ctx context.Context, req Request, r Reservation, unused int64) error
}

// Reservable reports whether a's admissions can be reserved and given back:
// fixed_window, token_bucket and gcra. A sliding period has no boundary a
// reservation can live inside, and the leaky bucket's Delay is the queue's,
// which a reservation cannot know (docs/algorithms.md, "Leases").
func Reservable(a Algorithm) bool {
	return a == FixedWindow || a == TokenBucket || a == GCRA
}

// Reserve is the pure core of Reserver.Reserve: it admits between cost and
// upTo units of state s at now and returns the new state and the
// Reservation. cost must be within [1, p.Capacity()] and p's algorithm
// Reservable.
//
// A peek's Remaining is exact (a request of that many is admitted, one of
// more denied), so when all that is asked for is admitted one Decide does
// it; only a denial peeks for what is left. The Redis scripts (reserve.lua)
// reserve the same way.
func Reserve(p *Policy, s State, now, cost, upTo int64) (State, Reservation) {
	grant := max(min(upTo, p.capacity()), cost)
	next, res := Decide(p, s, now, grant)
	if !res.Allowed && grant > cost {
		_, peek := Decide(p, s, now, 0)
		grant = max(min(peek.Remaining, grant-1), cost) // grant was denied
		next, res = Decide(p, s, now, grant)
	}
	if !res.Allowed { // fewer than cost left: the exact denial, s unchanged
		return s, Reservation{Result: res}
	}
	r := Reservation{Granted: grant, Result: res}
	switch p.Algorithm {
	case FixedWindow:
		r.Ref1 = next.Time - next.Time%p.periodMicros()
	case TokenBucket:
		r.Ref1 = next.Time
	case GCRA:
		r.Ref1, r.Ref2 = next.Time, gcraNow(&s, now, p.capacity()*p.emissionInterval())
	}
	return next, r
}

// Refund is the pure core of Reserver.Release: it gives back n units of the
// reservation r from state s at now. Like the Redis scripts' refunds, it
// never leaves the state fuller than it would be had r never been made.
func Refund(p *Policy, s State, now int64, r Reservation, n int64) State {
	if n <= 0 {
		return s
	}
	switch p.Algorithm {
	case FixedWindow:
		period := p.periodMicros()
		if s.Count == 0 || s.Time-s.Time%period != r.Ref1 || r.Ref1+period <= now {
			return s // the window is over: nothing left to give back
		}
		s.Count = max(0, s.Count-n)
		if s.Count == 0 {
			return State{}
		}
	case TokenBucket:
		if s.Count == 0 {
			return s
		}
		// Refill that happened since the reservation is not given back:
		// without the reservation the bucket might have been full then.
		back := max(0, n*p.emissionInterval()-max(0, s.Time-r.Ref1))
		s.Count = max(0, s.Count-back)
		if s.Count == 0 || s.Time+s.Count <= now {
			return State{}
		}
	case GCRA:
		if s.Time == 0 {
			return s
		}
		back := n * p.emissionInterval()
		if s.Time != r.Ref1 { // others were admitted since: keep what they may have lost
			back = max(0, back-max(0, now-r.Ref2))
		}
		s.Time -= back
		if s.Time <= now {
			return State{}
		}
	}
	return s
}
