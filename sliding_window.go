package sluice

// Sliding window counter: State.Time is the instant of the last admission,
// State.Count the units of its window (cur), State.Prev those of the window
// before (prev). The
// previous window is assumed to have been spread evenly, so the part of it still
// inside the sliding period (now−P, now] is prev·(P−e)/P, e = now − start.
// A request is admitted iff prev·(P−e)/P + cur + n ≤ L, compared exactly as
// prev·(P−e) + (cur+n)·P ≤ L·P (Policy.Validate keeps L·P at most 2^53).
func slidingWindow(p *Policy, s *State, now, n int64, res *Result) {
	period, limit := p.periodMicros(), p.Limit
	now, start, cur, prev := slidingWindowAt(s, now, period)
	e := now - start
	*res = Result{Limit: limit}
	// A peek (n = 0) is allowed when one unit would be: something is left.
	if ask := max(n, 1); cur+ask <= limit && prev*(period-e) <= (limit-cur-ask)*period {
		cur += n
		res.Allowed = true
	} else {
		res.RetryAfter = micros(slidingWindowRetry(period, limit, e, cur, prev, ask))
	}
	// Remaining: the largest m with prev·(P−e) + (cur+m)·P ≤ L·P.
	res.Remaining = max(0, limit-cur-ceilDiv(prev*(period-e), period))
	switch {
	case cur > 0:
		res.ResetAfter = micros(start + 2*period - now) // cur leaves the previous window
	case prev > 0:
		res.ResetAfter = micros(start + period - now)
	default:
		*s = State{}
		return
	}
	if res.Allowed && n > 0 { // a peek or a denial changes nothing
		*s = State{Time: now, Count: cur, Prev: prev}
	}
}

// slidingWindowAt reads s at now: the instant the decision runs at (never
// before the last admission: a clock that ran backwards means no time has
// passed), its window's start, and the units of that window and of the one
// before it.
func slidingWindowAt(s *State, now, period int64) (at, start, cur, prev int64) {
	if now < s.Time {
		now = s.Time
	}
	start = now - now%period
	switch s.Time - s.Time%period {
	case start:
		cur, prev = s.Count, s.Prev
	case start - period:
		prev = s.Count
	}
	return now, start, cur, prev
}

// slidingWindowRetry solves for the first instant the request is admitted: the
// previous window's weight decays linearly, so within this window that is the
// smallest e' with prev·(P−e') ≤ (L−cur−n)·P; failing that, the same question in
// the next window, where cur has become prev.
func slidingWindowRetry(period, limit, e, cur, prev, n int64) int64 {
	if cur+n <= limit && prev > 0 {
		if at := period - (limit-cur-n)*period/prev; at < period {
			return at - e
		}
	}
	wait := period - e // until the next window opens
	if cur == 0 {
		return wait
	}
	return wait + max(0, period-(limit-n)*period/cur)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
