package sluice

// Charge applies policy p to state s for a charge of cost units at now
// (microseconds since the Unix epoch) and returns the new state and the
// Result: the pure core of Charger.Charge. The cost is recorded whether or
// not it fits, up to what the algorithm can owe (docs/semantics.md,
// "Charging usage"). A charge that fits gives Decide's Result for the same
// cost, without Delay; one that does not has Allowed false, Remaining what
// is left (negative while the key owes units) and RetryAfter the wait until
// one unit is admitted.
//
// Like Decide, Charge is pure, and the new state only appends to s.Log's
// buffer or copies it, so s stays intact until the caller replaces it. p
// must be valid and cost within [0, MaxCharge]; see CheckCharge. A charge of
// 0 changes nothing (but the state aging back to initial).
func Charge(p *Policy, s State, now, cost int64) (State, Result) {
	var res Result
	ChargeInPlace(p, &s, now, cost, &res)
	return s, res
}

// ChargeInPlace is Charge updating *s to the new state and writing the
// Result into *res, as DecideInPlace is Decide.
func ChargeInPlace(p *Policy, s *State, now, cost int64, res *Result) {
	switch p.Algorithm {
	case FixedWindow:
		fixedWindowCharge(p, s, now, cost, res)
	case SlidingLog:
		slidingLogCharge(p, s, now, cost, res)
	case SlidingWindow:
		slidingWindowCharge(p, s, now, cost, res)
	case TokenBucket:
		tokenBucketCharge(p, s, now, cost, res)
	default: // GCRA and LeakyBucket: a charge has no Delay, the request is over
		gcraCharge(p, s, now, cost, res)
	}
}

// What a key can owe. Charges beyond these caps are recorded up to them, so
// that every quantity the math multiplies out stays below 2^53, exact in the
// Redis scripts' doubles too: a window or a log holds at most maxUsage
// units; a sliding window at most ⌊2^53/P⌋ per window, so that its previous
// window's weight prev·(P−e) does; a bucket misses at most maxSpan µs of
// credit (about 142 years), like the largest bucket.
const maxUsage = maxSpan

// slidingWindowCap is the most units a sliding window of period µs counts
// per window: at least L, which Validate bounds the same way.
func slidingWindowCap(period int64) int64 { return maxExact / period }

// Fixed window: the count grows past L. The window's end repays it all, so
// a charge that does not fit makes the next unit wait for it.
func fixedWindowCharge(p *Policy, s *State, now, n int64, res *Result) {
	period, limit := p.periodMicros(), p.Limit
	now, start, count := fixedWindowAt(s, now, period)
	fits := count+n <= limit
	count = min(count+n, maxUsage)
	*res = Result{Limit: limit, Allowed: fits, Remaining: limit - count}
	if count == 0 {
		*s = State{}
		return
	}
	res.ResetAfter = micros(start + period - now)
	if !fits {
		res.RetryAfter = res.ResetAfter
	}
	if n > 0 {
		*s = State{Time: now, Count: count}
	}
}

// Sliding window: cur grows past L; in the next window it weighs as prev
// until the weight has decayed enough, at most until that window ends.
func slidingWindowCharge(p *Policy, s *State, now, n int64, res *Result) {
	period, limit := p.periodMicros(), p.Limit
	now, start, cur, prev := slidingWindowAt(s, now, period)
	e := now - start
	fits := cur+n <= limit && prev*(period-e) <= (limit-cur-n)*period
	cur = min(cur+n, slidingWindowCap(period))
	*res = Result{Limit: limit, Allowed: fits, Remaining: limit - cur - ceilDiv(prev*(period-e), period)}
	if !fits {
		res.RetryAfter = micros(slidingWindowRetry(period, limit, e, cur, prev, 1))
	}
	switch {
	case cur > 0:
		res.ResetAfter = micros(start + 2*period - now)
	case prev > 0:
		res.ResetAfter = micros(start + period - now)
	default:
		*s = State{}
		return
	}
	if n > 0 {
		*s = State{Time: now, Count: cur, Prev: prev}
	}
}

// Sliding log: the charge is one more entry, leaving P after now. A log
// that already holds L entries (each of at least one unit) takes it into its
// newest entry instead, which moves to now: the log stays within the memory
// its limit allows, and its units leave later than they would, never
// sooner. So does a charge that would take the log past maxUsage units.
func slidingLogCharge(p *Policy, s *State, now, n int64, res *Result) {
	period, limit := p.periodMicros(), p.Limit
	if last, ok := s.Log.newest(); ok && now < last.Time {
		now = last.Time // time ran backwards: no time has passed
	}
	log, sum := s.Log.live(now-period, s.Count)
	fits := sum+n <= limit
	if n > 0 {
		add := min(n, maxUsage-sum)
		if add == n && int64(log.Len()) < limit {
			if s.Log.full() {
				log = log.grow() // as slidingLog: s's oldest slot must survive
			}
			log = log.push(LogEntry{Time: now, Cost: n})
		} else {
			newest, _ := log.newest() // the log holds units, so entries
			log = log.withNewest(LogEntry{Time: now, Cost: newest.Cost + add})
		}
		sum += add
	}
	*res = Result{Limit: limit, Allowed: fits, Remaining: limit - sum}
	if !fits {
		freed := int64(0)
		for i := 0; ; i++ { // entries leave oldest first
			e := log.at(i)
			freed += e.Cost
			if sum-freed+1 <= limit {
				res.RetryAfter = micros(e.Time + period - now)
				break
			}
		}
	}
	newest, ok := log.newest()
	if !ok {
		*s = State{}
		return
	}
	res.ResetAfter = micros(newest.Time + period - now)
	if n > 0 {
		*s = State{Log: log, Count: sum}
	}
}

// withNewest returns l with its newest entry replaced by e, in a buffer of
// its own of the same size: the receiver's entries are never overwritten.
func (l Log) withNewest(e LogEntry) Log {
	c := Log{buf: make([]LogEntry, len(l.buf)), n: l.n}
	for i := 0; i < l.n; i++ {
		c.buf[i] = l.at(i)
	}
	c.buf[c.n-1] = e
	return c
}
