package memory

import (
	"math"

	"github.com/sluicehq/sluice"
)

// How the compact part holds a state: a time and 32 bits, x, whose meaning
// depends on the algorithm. Each decodes to the exact state it came from, with
// the raw times the exact part keeps, so the policy's current numbers apply to
// it as they would there (docs/semantics.md, "Changing a policy"):
//
//	fixed_window    time: the last admission; x: the window's count
//	sliding_log     time: the newest entry; x: the log's sum (exact for a log of one entry)
//	sliding_window  time: the last admission; x: cur<<16 | prev
//	token_bucket    time: the last refill plus the missing credit (when the bucket is full again)
//	leaky_bucket,   time: the TAT; x: the tolerance B·T it was admitted under
//	gcra            (0 when it exceeds 32 bits: the current policy's)
//
// A log of several entries is held as one entry of their sum at the newest
// one's time: never less than the log, released later. A fixed window's count
// of 2^32-1 or more is held as "at least that", which denies until its window
// ends. Sliding windows with a count of 65,535 or more have no compact form:
// they go to a floor (see coldFloor).
type coldState struct {
	time int64
	x    uint32
}

const (
	fixedWindowIndex   = 0
	slidingWindowIndex = 2
	tokenBucketIndex   = 3
	// coldSaturated, a fixed window's x: at least this many.
	coldSaturated = math.MaxUint32
	// coldCountLimit bounds a sliding window's cur and prev in x.
	coldCountLimit = 1<<16 - 1
	// fullUnits is more units than any limit (Limit < 2^53): a floor's units
	// when what it holds was saturated.
	fullUnits = 1 << 53
)

// isBucket reports whether alg (an algorithmIndex) is one of the buckets, whose
// state is a time at which they are full again.
func isBucket(alg uint8) bool { return alg >= tokenBucketIndex }

// encodeCold returns st in compact form; exact reports whether decoding gives
// back st itself (else a state never below it), ok whether there is a compact
// form at all.
func encodeCold(alg uint8, st *sluice.State) (c coldState, exact, ok bool) {
	switch alg {
	case fixedWindowIndex:
		if st.Count >= coldSaturated {
			return coldState{st.Time, coldSaturated}, false, true
		}
		return coldState{st.Time, uint32(st.Count)}, true, true
	case slidingLogIndex:
		newest, _ := st.Log.Newest()
		if st.Count >= coldSaturated {
			// Charged beyond the limit: kept saturated at the newest entry's
			// time, so the key still owes (how much is lost) until no
			// earlier than the log would have repaid it.
			return coldState{newest.Time, coldSaturated}, false, true
		}
		// Admitted units sum to at most a sliding_log limit
		// (MaxSlidingLogLimit): they fit.
		return coldState{newest.Time, uint32(st.Count)}, st.Log.Len() <= 1, true
	case slidingWindowIndex:
		if st.Count >= coldCountLimit || st.Prev >= coldCountLimit {
			return coldState{}, false, false
		}
		return coldState{st.Time, uint32(st.Count)<<16 | uint32(st.Prev)}, true, true
	case tokenBucketIndex:
		return coldState{st.Time + st.Count, 0}, true, true
	}
	if st.Count < 0 || st.Count >= coldSaturated { // a tolerance too long to keep: the current policy's is used
		return coldState{st.Time, 0}, false, true
	}
	return coldState{st.Time, uint32(st.Count)}, true, true
}

// decode writes into *st the state c holds, for a decision under p at now.
func (c coldState) decode(p *sluice.Policy, alg uint8, now int64, st *sluice.State) {
	switch alg {
	case fixedWindowIndex:
		n := int64(c.x)
		if c.x == coldSaturated {
			n = max(n, p.Limit)
		}
		*st = sluice.State{Time: c.time, Count: n}
	case slidingLogIndex:
		unitsAt(alg, int64(c.x), c.time, st)
	case slidingWindowIndex:
		*st = sluice.State{Time: c.time, Count: int64(c.x >> 16), Prev: int64(c.x & 0xFFFF)}
	default:
		bucketAt(alg, c.time, now, st)
		if alg != tokenBucketIndex {
			st.Count = int64(c.x)
		}
	}
}

// bucketAt writes into *st a bucket that is full again at tat: exact for
// gcra and leaky_bucket; for token_bucket exact unless the clock reads before
// the last refill (then it counts the time since as not yet refilled).
func bucketAt(alg uint8, tat, now int64, st *sluice.State) {
	switch {
	case alg != tokenBucketIndex:
		*st = sluice.State{Time: tat}
	case tat <= now:
		*st = sluice.State{}
	default:
		*st = sluice.State{Time: now, Count: tat - now}
	}
}

// unitsAt writes into *st the window or log state of n units admitted at
// time: never less than any state of at most n units admitted at or before
// time, for every policy of the algorithm. Counts carry over a policy
// change as counts, so this holds under any numbers.
func unitsAt(alg uint8, n, time int64, st *sluice.State) {
	switch {
	case n <= 0:
		*st = sluice.State{}
	case alg == slidingLogIndex:
		*st = sluice.State{Count: n, Log: sluice.LogOf(sluice.LogEntry{Time: time, Cost: n})}
	default: // fixed_window, sliding_window: n in the window of time
		*st = sluice.State{Time: time, Count: n}
	}
}

// units returns a window or log state's units and when the last was
// admitted: unitsAt of them is never less than the state.
func units(alg uint8, st *sluice.State) (n, time int64) {
	switch alg {
	case slidingLogIndex:
		newest, _ := st.Log.Newest()
		return st.Count, newest.Time
	case slidingWindowIndex:
		return st.Count + st.Prev, st.Time
	}
	return st.Count, st.Time
}

// units is units for a slot of alg holding c.
func (c coldState) units(alg uint8) int64 {
	switch {
	case alg == slidingWindowIndex:
		return int64(c.x>>16) + int64(c.x&0xFFFF)
	case alg == fixedWindowIndex && c.x == coldSaturated:
		return fullUnits
	}
	return int64(c.x)
}

// tatOf returns when a bucket state is full again.
func tatOf(alg uint8, st *sluice.State) int64 {
	if alg == tokenBucketIndex {
		if st.Count == 0 {
			return 0
		}
		return st.Time + st.Count
	}
	return st.Time
}

// merge sets *a to a state, under p at now, never less than *a or *b: the
// larger when one holds at least as much as the other in every respect (so a
// key's own older copy changes nothing), else n units at t, the most units of
// either at the later time.
func merge(p *sluice.Policy, alg uint8, now int64, a, b *sluice.State) {
	if isBucket(alg) {
		if tatOf(alg, b) > tatOf(alg, a) {
			*a = *b
		}
		return
	}
	// Logs of several entries are not compared: one may hold more now and
	// release it sooner.
	if alg != slidingLogIndex || a.Log.Len() <= 1 && b.Log.Len() <= 1 {
		switch ca, cb := windowCounts(p, alg, now, a), windowCounts(p, alg, now, b); {
		case cb.cur <= ca.cur && cb.prev <= ca.prev:
			return
		case ca.cur <= cb.cur && ca.prev <= cb.prev:
			*a = *b
			return
		}
	}
	na, ta := units(alg, a)
	nb, tb := units(alg, b)
	unitsAt(alg, max(na, nb), max(ta, tb), a)
}

// counts is a window or log state as it stands at an instant: for a log, its
// sum and the time of its one entry (logs merged here have one).
type counts struct{ cur, prev int64 }

// windowCounts returns what st counts at now under p: for the windows, the
// current and previous window's units (as the algorithms read them); for a
// log of one entry, its time (to compare) and its units, or nothing once the
// entry has left the period.
func windowCounts(p *sluice.Policy, alg uint8, now int64, st *sluice.State) counts {
	period := p.Period.Microseconds()
	switch alg {
	case slidingLogIndex:
		newest, ok := st.Log.Newest()
		if !ok || newest.Time+period <= now {
			return counts{}
		}
		return counts{cur: st.Count, prev: newest.Time}
	case slidingWindowIndex:
		now = max(now, st.Time) // as the algorithm reads a clock that ran backwards
		start := now - now%period
		switch st.Time - st.Time%period {
		case start:
			return counts{cur: st.Count, prev: st.Prev}
		case start - period:
			return counts{prev: st.Count}
		}
		return counts{}
	}
	now = max(now, st.Time) // fixed_window
	if st.Time >= now-now%period {
		return counts{cur: st.Count}
	}
	return counts{}
}
