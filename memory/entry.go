package memory

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
)

// entryKey identifies a state: like a Redis key, it holds the policy's name and
// algorithm, so two policies of one name and different algorithms keep
// separate states, as on every store.
type entryKey struct {
	policy string
	key    string
	alg    uint8 // algorithmIndex of the policy's algorithm
}

// set makes id the key of (p, key)'s state. It writes the fields in place:
// an entryKey returned by value is copied with wide loads over the narrow
// stores that built it, which stall, on every decision.
func (id *entryKey) set(p *sluice.Policy, key string) {
	id.policy, id.key, id.alg = p.Name, key, algorithmIndex(p.Algorithm)
}

// keyText is a key as an entry holds it. A key of up to shortKeyLen bytes
// lives inside the entry, so that finding an entry by it reads no memory
// but the index and the entry (with many keys a separate copy of the key
// is one more likely cache miss per decision), and storing it allocates
// nothing. A longer key is held in a copy of its own.
type keyText struct {
	short [shortKeyLen + 1]byte // a short key's bytes, then its length or longKey
	long  string                // a key longer than shortKeyLen; else ""
}

const (
	shortKeyLen = 15
	longKey     = 0xFF // in short's last byte: the key is in long
)

// keyTextOf returns key as an entry holds it. A long key is copied, so that
// a stored key does not pin the caller's buffer (a request header, say) for
// as long as it lives.
func keyTextOf(key string) keyText {
	var t keyText
	if len(key) <= shortKeyLen {
		copy(t.short[:], key)
		t.short[shortKeyLen] = byte(len(key))
	} else {
		t.short[shortKeyLen] = longKey
		t.long = strings.Clone(key)
	}
	return t
}

// is reports whether t holds key.
func (t *keyText) is(key string) bool {
	if n := t.short[shortKeyLen]; n != longKey {
		return int(n) == len(key) && string(t.short[:n]) == key
	}
	return t.long == key
}

// len is the key's length in bytes.
func (t *keyText) len() int {
	if n := t.short[shortKeyLen]; n != longKey {
		return int(n)
	}
	return len(t.long)
}

// String returns the key.
func (t *keyText) String() string {
	if n := t.short[shortKeyLen]; n != longKey {
		return string(t.short[:n])
	}
	return t.long
}

// slidingLogIndex is algorithmIndex(sluice.SlidingLog).
const slidingLogIndex = 1

// concurrencyIndex is algorithmIndex(sluice.Concurrency).
const concurrencyIndex = 6

// algorithmIndex is a's position in stateAlgorithms.
func algorithmIndex(a sluice.Algorithm) uint8 {
	switch a { // a switch compares lengths first: cheaper than a loop over the list
	case sluice.FixedWindow:
		return 0
	case sluice.SlidingLog:
		return slidingLogIndex
	case sluice.SlidingWindow:
		return 2
	case sluice.TokenBucket:
		return 3
	case sluice.LeakyBucket:
		return 4
	case sluice.Concurrency:
		return concurrencyIndex
	case sluice.GCRA:
		return 5
	}
	// Stores assume valid policies (sluice.Store); this one refuses to pick
	// an algorithm for one that is not, before it locks or changes anything.
	panic(fmt.Sprintf("memory: policy has unknown algorithm %q: validate policies with Policy.Validate (sluice.New does)", string(a)))
}

// entry is one key's state, 96 bytes: a decision reads all of it, and with
// many keys what it costs is mostly how many cache lines it reads — always
// two at 96 bytes, often three at 104, one more for a key held elsewhere. So
// a short key is held inline in the space of two string headers, the policy's
// name is its usage's, the sliding log's ring, which no other algorithm uses,
// lives behind a pointer, and of the hash only the index's tag is kept.
type entry struct {
	tag     uint32 // tagOf the hash
	logCap  logCapacity
	alg     uint8
	pinned  bool    // part of a decision in progress: not to be evicted
	key     keyText // the policy's name is usage's
	time    int64   // the state's Time, Count and Prev
	count   int64
	prev    int64
	log     *sluice.Log // the state's Log; nil until a log holds entries
	expires int64       // microseconds; the state is initial from then on
	safeAt  int64       // microseconds; from then on forgetting it is safe (see safeAt)
	usage   *usage
}

// logCapacity is the capacity of a sliding log's ring: a power of two (or 0)
// that holds at most MaxSlidingLogLimit entries, so at most 16,384.
type logCapacity uint16

// The ring doubles when full: its capacity stays under twice the largest log.
const _ = logCapacity(2 * sluice.MaxSlidingLogLimit)

// load copies the entry's state into *st.
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
