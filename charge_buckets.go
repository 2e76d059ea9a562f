package sluice

// The buckets owe credit: a charge takes n·T µs of it whether the bucket
// holds them or not, up to maxSpan µs missing in all, and the bucket refills
// at its rate from below empty.

// Token bucket: the missing credit grows past B·T.
func tokenBucketCharge(p *Policy, s *State, now, n int64, res *Result) {
	interval := p.emissionInterval()
	missing, last := tokenBucketAt(s, now)
	missing = bucketCharge(p, missing, p.capacity()*interval, interval, n, res)
	if missing == 0 {
		*s = State{}
		return
	}
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
	wait := bucketCharge(p, max(s.Time, now)-now, tolerance, interval, n, res)
	if wait == 0 {
		*s = State{}
		return
	}
	if n > 0 {
		*s = State{Time: now + wait, Count: max(tolerance, wait)}
	}
}

// bucketCharge charges n units to a bucket of full µs of credit that misses
// missing µs of it, writes the Result, and returns what it misses then.
func bucketCharge(p *Policy, missing, full, interval, n int64, res *Result) int64 {
	// n·T, or for a charge so large that it would overflow, enough to reach
	// the cap on its own.
	add := min(n, maxSpan/interval+1) * interval
	fits := missing+add <= full
	missing = min(missing+add, maxSpan)
	*res = Result{Limit: p.Limit, Allowed: fits, Remaining: floorDiv(full-missing, interval), ResetAfter: micros(missing)}
	if !fits {
		res.RetryAfter = micros(missing + interval - full)
	}
	return missing
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
