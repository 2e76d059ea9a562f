package sluice

// The buckets owe credit: a charge takes n·T µs of it whether the bucket
// holds them or not, up to maxSpan µs missing in all, and the bucket refills
// at its rate from below empty.

// chargeCredit is the credit n units take, n·T µs, or, for a charge so large
// that it would overflow, enough to reach the cap on its own.
func chargeCredit(n, interval int64) int64 { return min(n, maxSpan/interval+1) * interval }

// Token bucket: the missing credit grows past B·T.
func tokenBucketCharge(p *Policy, s *State, now, n int64, res *Result) {
	interval := p.emissionInterval()
	full := p.capacity() * interval
	missing, last := s.Count, s.Time
	if now > last {
		missing = max(0, missing-(now-last))
		last = now
	} // else the clock ran backwards: no time has passed
	add := chargeCredit(n, interval)
	fits := missing+add <= full
	missing = min(missing+add, maxSpan)
	*res = Result{Limit: p.Limit, Allowed: fits, Remaining: floorDiv(full-missing, interval)}
	if !fits {
		res.RetryAfter = micros(missing + interval - full)
	}
	if missing == 0 {
		*s = State{}
		return
	}
	res.ResetAfter = micros(missing)
	if n > 0 {
		*s = State{Time: last, Count: missing}
	}
}

// GCRA and the leaky bucket: TAT moves past now + B·T. State.Count keeps
// what bounds TAT − now at the write, the charge's wait when it exceeds the
// tolerance, so that gcraNow does not take the debt for a clock that ran
// backwards.
func gcraCharge(p *Policy, s *State, now, n int64, res *Result) {
	interval := p.emissionInterval()
	tolerance := p.capacity() * interval
	now = gcraNow(s, now, tolerance)
	wait := max(s.Time, now) - now
	add := chargeCredit(n, interval)
	fits := wait+add <= tolerance
	wait = min(wait+add, maxSpan)
	*res = Result{Limit: p.Limit, Allowed: fits, Remaining: floorDiv(tolerance-wait, interval)}
	if !fits {
		res.RetryAfter = micros(wait + interval - tolerance)
	}
	if wait == 0 {
		*s = State{}
		return
	}
	res.ResetAfter = micros(wait)
	if n > 0 {
		*s = State{Time: now + wait, Count: max(tolerance, wait)}
	}
}

// floorDiv is ⌊a/b⌋ for b > 0: what is left of a bucket that owes part of a
// unit is −1, not 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
