package memory

import "github.com/sluicehq/sluice"

// entryKey identifies a state: like a Redis key, it holds the policy's name and
// algorithm, so two policies of one name and different algorithms keep
// separate states, as on every store.
type entryKey struct {
	policy string
	key    string
	alg    uint8 // algorithmIndex of the policy's algorithm
}

func idOf(p *sluice.Policy, key string) entryKey {
	return entryKey{policy: p.Name, alg: algorithmIndex(p.Algorithm), key: key}
}

// algorithmIndex is a's position in sluice.Algorithms.
func algorithmIndex(a sluice.Algorithm) uint8 {
	switch a { // a switch compares lengths first: cheaper than a loop over the list
	case sluice.FixedWindow:
		return 0
	case sluice.SlidingLog:
		return 1
	case sluice.SlidingWindow:
		return 2
	case sluice.TokenBucket:
		return 3
	case sluice.LeakyBucket:
		return 4
	}
	return 5 // GCRA: the policy is valid
}

// entry is one key's state, 96 bytes: a decision reads and writes all of it
// but usage, and with many keys what it costs is mostly how many cache lines
// it spans — always two at 96 bytes, often three at 104. So the sliding
// log's ring, which no other algorithm uses, lives behind a pointer, and of
// the hash only the index's tag is kept.
type entry struct {
	tag     uint32 // tagOf the hash
	logCap  logCapacity
	alg     uint8
	pinned  bool // part of a decision in progress: not to be evicted
	key     string
	policy  string
	time    int64 // the state's Time, Count and Prev
	count   int64
	prev    int64
	log     *sluice.Log // the state's Log; nil until a log holds entries
	expires int64       // microseconds; the state is initial from then on
	safeAt  int64       // microseconds; from then on forgetting it is safe (see safeAt)
	usage   *usage
}

// load copies the entry's state into *st.
// logCapacity is the capacity of a sliding log's ring: a power of two (or 0)
// that holds at most MaxSlidingLogLimit entries, so at most 16,384.
type logCapacity uint16

// The ring doubles when full: its capacity stays under twice the largest log.
const _ = logCapacity(2 * sluice.MaxSlidingLogLimit)

func (e *entry) load(st *sluice.State) {
	*st = sluice.State{Time: e.time, Count: e.count, Prev: e.prev}
	if e.log != nil {
		st.Log = *e.log
	}
}

// store replaces the entry's state with *st. The log's ring is allocated on
// a key's first admission, which allocates for the key anyway.
func (e *entry) store(st *sluice.State) {
	e.time, e.count, e.prev = st.Time, st.Count, st.Prev
	switch {
	case e.log != nil:
		*e.log = st.Log
	case st.Log.Len() > 0:
		log := st.Log
		e.log = &log
	}
}
