package sluice

// GCRA (generic cell rate algorithm): State.Time is the theoretical arrival time
// (TAT), the instant the bucket would be empty again. Each unit pushes TAT back by
// the emission interval T; the burst tolerance is B·T. A request of n units is
// admitted iff max(TAT, now) + n·T − now ≤ B·T. This is the token bucket with one
// stored number: TAT − now is the bucket's missing credit.
func gcra(p *Policy, s State, now, n int64) (State, Result) {
	st, res, _ := gcraDecide(p, s, now, n)
	return st, res
}

// gcraDecide also returns the admitted request's departure wait, max(TAT, now) −
// now, which the leaky bucket reports as Delay.
func gcraDecide(p *Policy, s State, now, n int64) (State, Result, int64) {
	interval := p.emissionInterval()
	tolerance := p.capacity() * interval
	// After any admission TAT ≤ then + B·T, so a now before TAT − B·T means the
	// clock ran backwards: take the earliest instant the state allows, as if no
	// time had passed.
	now = max(now, s.Time-tolerance)
	tat := max(s.Time, now)
	wait := tat - now
	res := Result{Limit: p.Limit}
	if wait+n*interval <= tolerance {
		tat += n * interval
		res.Allowed = true
	} else {
		res.RetryAfter = micros(wait + n*interval - tolerance)
	}
	res.Remaining = (tolerance - (tat - now)) / interval
	if tat <= now {
		return State{}, res, wait
	}
	res.ResetAfter = micros(tat - now)
	return State{Time: tat}, res, wait
}
