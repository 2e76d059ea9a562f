package sluice

// Token bucket: a bucket of B tokens refilled at one token per emission interval
// T. State.Time is the last refill, State.Count the missing credit in
// microseconds (B·T − credit, so the zero State is a full bucket). A request of n
// units is admitted iff the bucket holds n tokens after refilling. After the
// policy's bucket shrank, the missing credit may exceed B·T: the bucket holds
// less than nothing until enough has refilled.
func tokenBucket(p *Policy, s *State, now, n int64, res *Result) {
	interval := p.emissionInterval()
	full := p.capacity() * interval
	missing, last := tokenBucketAt(s, now)
	*res = Result{Limit: p.Limit}
	// A peek (n = 0) asks for one unit's credit and takes none.
	if ask := max(n, 1) * interval; missing+ask <= full {
		missing += n * interval
		res.Allowed = true
	} else {
		res.RetryAfter = micros(missing + ask - full)
	}
	// missing may exceed a bucket shrunk since; under one unit's credit is 0
	// units, without a division (a denial's case).
	if credit := full - missing; credit >= interval {
		res.Remaining = credit / interval
	}
	if missing == 0 {
		*s = State{}
		return
	}
	res.ResetAfter = micros(missing)
	if res.Allowed && n > 0 { // a peek or a denial keeps the refill time
		*s = State{Time: last, Count: missing}
	}
}

// tokenBucketAt reads s at now: the credit missing once refilled, and the
// refill's time (s's own when the clock ran backwards: no time has passed).
func tokenBucketAt(s *State, now int64) (missing, last int64) {
	missing, last = s.Count, s.Time
	if now > last {
		missing = max(0, missing-(now-last))
		last = now
	}
	return missing, last
}
