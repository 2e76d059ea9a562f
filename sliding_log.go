package sluice

// Sliding log: State.Log holds every admitted (time, cost) of the last period,
// oldest first, and State.Count their sum. An entry admitted at ts counts until
// ts + P. A request is admitted iff sum + n ≤ L, so at most L pass in every span
// (t−P, t] — exactly, at the price of one entry per admitted request.
func slidingLog(p *Policy, s *State, now, n int64, res *Result) {
	period, limit := p.periodMicros(), p.Limit
	if last, ok := s.Log.newest(); ok && now < last.Time {
		now = last.Time // time ran backwards: no time has passed
	}
	log, sum := s.Log.live(now-period, s.Count)
	*res = Result{Limit: limit}
	// A peek (n = 0) is allowed when one unit would be: something is left.
	ask := max(n, 1)
	if sum+ask <= limit {
		if n > 0 {
			if s.Log.full() {
				// The slot live freed still holds s's oldest entry, and s
				// must survive until the store commits: write elsewhere.
				log = log.grow()
			}
			log = log.push(LogEntry{Time: now, Cost: n})
			sum += n
		}
		res.Allowed = true
	} else {
		// Entries leave oldest first; wait for the one whose departure frees enough.
		freed := int64(0)
		for i := 0; ; i++ {
			e := log.at(i)
			freed += e.Cost
			if sum-freed+ask <= limit {
				res.RetryAfter = micros(e.Time + period - now)
				break
			}
		}
	}
	res.Remaining = max(0, limit-sum) // sum exceeds a limit lowered since
	newest, ok := log.newest()
	if !ok {
		*s = State{}
		return
	}
	res.ResetAfter = micros(newest.Time + period - now)
	if res.Allowed && n > 0 { // a peek or a denial keeps the untrimmed log
		*s = State{Log: log, Count: sum}
	}
}

// live returns the log without its entries at or before horizon, which have
// left the period, and sum less their costs: a view of the same entries,
// the receiver unchanged. Small enough to be inlined on every decision.
func (l Log) live(horizon, sum int64) (Log, int64) {
	for l.n > 0 && l.buf[l.head].Time <= horizon {
		sum -= l.buf[l.head].Cost
		l.head = (l.head + 1) & (len(l.buf) - 1)
		l.n--
	}
	return l, sum
}

// LogEntry is one admitted request of a sliding log.
type LogEntry struct {
	Time int64 // microseconds since the Unix epoch
	Cost int64
}

// Log is a ring of LogEntry values, oldest first. Its methods return a new Log
// instead of changing the receiver, and never overwrite the receiver's entries:
// a store can try a decision and throw it away.
type Log struct {
	buf  []LogEntry // len is a power of two (or 0)
	head int
	n    int
}

// Len returns the number of entries.
func (l Log) Len() int { return l.n }

// at returns the i-th oldest entry.
func (l Log) at(i int) LogEntry { return l.buf[(l.head+i)&(len(l.buf)-1)] }

// Newest returns the newest entry, and false when the log is empty.
func (l Log) Newest() (LogEntry, bool) { return l.newest() }

// LogOf returns a log holding entries, oldest first: for a store that keeps a
// log in a form of its own and rebuilds it for a decision.
func LogOf(entries ...LogEntry) Log {
	var l Log
	for _, e := range entries {
		l = l.push(e)
	}
	return l
}

func (l Log) newest() (LogEntry, bool) {
	if l.n == 0 {
		return LogEntry{}, false
	}
	return l.at(l.n - 1), true
}

func (l Log) full() bool { return l.n == len(l.buf) }

// grow copies the entries into a new buffer of twice the size.
func (l Log) grow() Log {
	grown := make([]LogEntry, max(4, 2*len(l.buf)))
	for i := 0; i < l.n; i++ {
		grown[i] = l.at(i)
	}
	return Log{buf: grown, n: l.n}
}

// push appends e, growing into a new buffer when the ring is full.
func (l Log) push(e LogEntry) Log {
	if l.full() {
		l = l.grow()
	}
	l.buf[(l.head+l.n)&(len(l.buf)-1)] = e
	l.n++
	return l
}

// Cap returns how many entries the log's buffer holds (a power of two, or 0):
// a store accounting for its memory reads it.
func (l Log) Cap() int { return len(l.buf) }
