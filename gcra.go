package sluice

// GCRA (generic cell rate algorithm): State.Time is the theoretical arrival time
// (TAT), the instant the bucket would be empty again. Each unit pushes TAT back by
// the emission interval T; the burst tolerance is B·T. A request of n units is
// admitted iff max(TAT, now) + n·T − now ≤ B·T. This is the token bucket with one
// stored time: TAT − now is the bucket's missing credit, which may exceed B·T
// after the policy's bucket shrank.
//
// State.Count is the tolerance B·T of the policy that made the last admission
// (0 for a state written before it was kept: then the current policy's), or
// the TAT − now a charge left when that is more. It only tells a clock that
// ran backwards from a policy that shrank, or a key that owes: see gcraNow.
func gcra(p *Policy, s *State, now, n int64, res *Result) {
	gcraDecide(p, s, now, n, res)
}

// gcraDecide also returns the admitted request's departure wait, max(TAT, now) −
// now, which the leaky bucket reports as Delay.
func gcraDecide(p *Policy, s *State, now, n int64, res *Result) (wait int64) {
	interval := p.emissionInterval()
	tolerance := p.capacity() * interval
	now = gcraNow(s, now, tolerance)
	tat := max(s.Time, now)
	wait = tat - now
	*res = Result{Limit: p.Limit}
	// A peek (n = 0) asks for one unit's room and takes none.
	if ask := max(n, 1) * interval; wait+ask <= tolerance {
		tat += n * interval
		res.Allowed = true
	} else {
		res.RetryAfter = micros(wait + ask - tolerance)
	}
	if credit := tolerance - (tat - now); credit >= interval { // less is 0 units: no division (a denial's case)
		res.Remaining = credit / interval
	}
	if tat <= now {
		*s = State{}
		return wait
	}
	res.ResetAfter = micros(tat - now)
	if res.Allowed && n > 0 {
		*s = State{Time: tat, Count: tolerance}
	}
	return wait
}

// gcraNow is the instant a decision on s runs at. An admission at t leaves TAT ≤
// t + tolerance (the admitting policy's B·T, kept in s.Count; a charge keeps
// its larger TAT − t there), so a now before TAT − tolerance means the clock ran backwards: take the earliest instant the
// state allows, as if no time had passed. The kept tolerance, not the current
// policy's, makes a bucket that shrank since look as empty as it is instead of
// moving now forward.
//
// tolerance is the current policy's B·T, taken by the caller, which has
// divided for T already.
func gcraNow(s *State, now, tolerance int64) int64 {
	if s.Count != 0 {
		tolerance = s.Count
	}
	return max(now, s.Time-tolerance)
}
