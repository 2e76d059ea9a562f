package sluice

// Leaky bucket as a shaper: a queue of at most B units that drains one unit every
// emission interval T. State.Time is the TAT of the queue's tail, so admission is
// GCRA's rule; what the leaky bucket adds is Delay: the admitted request leaves
// the queue at max(TAT, now), so departures are spaced n·T apart and the upstream
// sees a constant rate.
func leakyBucket(p *Policy, s *State, now, n int64, res *Result) {
	wait := gcraDecide(p, s, now, n, res)
	if res.Allowed && n > 0 { // a peek admits nothing, so nothing waits
		res.Delay = micros(wait)
	}
}
