package sluice

// Fixed window: State.Time is the instant of the last admission, State.Count
// the units admitted in its window. Windows are [k·P, (k+1)·P). A request is admitted iff
// count + n ≤ L; when denied, the same request passes as soon as the next window
// opens. At most L pass per window, but 2L can pass within one period that
// straddles a boundary.
func fixedWindow(p *Policy, s *State, now, n int64, res *Result) {
	period, limit := p.periodMicros(), p.Limit
	now, start, count := fixedWindowAt(s, now, period)
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

// fixedWindowAt reads s at now: the instant the decision runs at (never
// before the last admission: a clock that ran backwards means no time has
// passed), its window's start and the units counted in that window.
func fixedWindowAt(s *State, now, period int64) (at, start, count int64) {
	if now < s.Time {
		now = s.Time
	}
	start = now - now%period
	if s.Time >= start {
		count = s.Count
	}
	return now, start, count
}
