package sluice

// Fixed window: State.Time is the instant of the last admission, State.Count
// the units admitted in its window. Windows are [k·P, (k+1)·P). A request is admitted iff
// count + n ≤ L; when denied, the same request passes as soon as the next window
// opens. At most L pass per window, but 2L can pass within one period that
// straddles a boundary.
func fixedWindow(p *Policy, s *State, now, n int64, res *Result) {
	period, limit := p.periodMicros(), p.Limit
	if now < s.Time {
		now = s.Time // time ran backwards: no time has passed
	}
	start := now - now%period
	var count int64
	if s.Time >= start {
		count = s.Count
	}
	*res = Result{Limit: limit}
	// A peek (n = 0) is allowed when one unit would be: something is left.
	if count+max(n, 1) <= limit {
		count += n
		res.Allowed = true
	} else {
		res.RetryAfter = micros(start + period - now)
	}
	res.Remaining = max(0, limit-count) // count exceeds a limit lowered since
	if count == 0 {
		*s = State{}
		return
	}
	res.ResetAfter = micros(start + period - now)
	if res.Allowed && n > 0 { // a peek or a denial changes nothing
		*s = State{Time: now, Count: count}
	}
}
