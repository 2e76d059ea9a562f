package memory

import (
	"sync"

	"github.com/sluicehq/sluice"
)

// shard is one lock stripe: the positions of its entries in the store's
// arena, listed densely, which makes sweeping and sampling for eviction
// cheap, and an index to them keyed by the hash each decision computes once,
// which is cheaper than hashing two strings again.
type shard struct {
	mu     sync.Mutex
	index  index
	arena  *arena
	chunks []*chunk                    // the arena's, as of the shard's last fresh position
	owned  []int32                     // the positions of the shard's entries
	free   []int32                     // positions of entries removed, for the next insertions
	bytes  int64                       // charged against the byte budget
	hand   int                         // where in owned the next sweep or eviction sample starts
	cold   *coldTable                  // the compact part; nil until the shard first needs it
	slots  map[int32][]sluice.HeldSlot // the slots of concurrency entries, by position (slots.go)
	_      [64]byte                    // keep neighbouring shards' mutexes off one cache line
}

// sweepPerInsert is how many entries each insertion checks for expiry. Two keep
// the shard within about twice its live keys without a background goroutine.
const sweepPerInsert = 2

// evictSample is how many entries are compared when a full shard must evict,
// and sampleReach how far the search goes on when none of them is safe to drop.
const evictSample, sampleReach = 8, 32

// find returns the position of id's entry.
func (sh *shard) find(h uint64, id *entryKey) (int32, bool) {
	slots := sh.index.slots
	mask := len(slots) - 1
	if mask < 0 {
		return 0, false
	}
	tag := uint64(tagOf(h))
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		slot := slots[i]
		if slot == 0 {
			return 0, false
		}
		if slot>>32 != tag {
			continue
		}
		pos := slotPos(slot)
		if e := sh.at(pos); e.key.is(id.key) && e.alg == id.alg && e.usage.name == id.policy {
			return pos, true
		}
	}
}

// update replaces the state of entry i with what a decision under p produced.
func (sh *shard) update(i int32, p *sluice.Policy, st *sluice.State, res *sluice.Result, now int64, logCap logCapacity) {
	e := sh.at(i)
	expires := now + res.ResetAfter.Microseconds()
	// After a clock step backwards ResetAfter counts from the instant the
	// state was last at; never forget it earlier than before.
	expires = max(expires, e.expires)
	sh.charge(e, logCap)
	e.expires, e.safeAt = expires, safeAt(p, res, now, expires)
	e.store(st)
}

// charge sets what entry e is charged beyond its key to logCap entries of a
// log (or their worth of slots).
func (sh *shard) charge(e *entry, logCap logCapacity) {
	if logCap != e.logCap { // only a log's buffer or a slot set changes the charge
		bytes := (int64(logCap) - int64(e.logCap)) * logEntryBytes
		sh.bytes += bytes
		e.usage.bytes.Add(bytes) // shared by every shard: not on every decision
		e.logCap = logCap
	}
}

// keep follows a peek or a denial under p, which left entry i's state as it
// was. Its expiry and safeAt then change only when the policy did since the
// state was written (a longer window keeps it longer, a smaller capacity makes
// it unsafe to drop sooner), so keep writes only then: a hot key being denied
// stays in every core's cache. A safeAt that would come earlier (a window's
// count decaying, a bucket draining) is left as it is: forgetting the state
// later than it may be is never unsafe.
func (sh *shard) keep(i int32, p *sluice.Policy, res *sluice.Result, now int64) {
	e := sh.at(i)
	expires := max(now+res.ResetAfter.Microseconds(), e.expires)
	at := safeAt(p, res, now, expires)
	if expires != e.expires || at > max(e.safeAt, now) {
		e.expires, e.safeAt = expires, max(at, e.safeAt)
	}
}

// insert adds a new entry for what a decision under p produced; the caller has
// made room.
func (sh *shard) insert(h uint64, id entryKey, u *usage, p *sluice.Policy, st *sluice.State, res *sluice.Result, now int64, logCap logCapacity) {
	expires := now + res.ResetAfter.Microseconds()
	pos := sh.take()
	e := sh.at(pos)
	*e = entry{tag: tagOf(h), key: keyTextOf(id.key), alg: id.alg, usage: u,
		expires: expires, safeAt: safeAt(p, res, now, expires), logCap: logCap}
	e.store(st)
	bytes := entryBytes(len(id.key), logCap)
	sh.bytes += bytes
	u.add(bytes)
	sh.index.add(e.tag, pos)
}

// sweep checks up to n entries from the hand and forgets the expired ones.
func (sh *shard) sweep(now int64, n int) {
	for ; n > 0 && len(sh.owned) > 0; n-- {
		if sh.hand >= len(sh.owned) {
			sh.hand = 0
		}
		pos := sh.owned[sh.hand]
		if e := sh.at(pos); e.expires <= now && !e.pinned {
			sh.remove(pos) // the last entry listed moved here; check it next
		} else {
			sh.hand++
		}
	}
}

// pickSafe returns the position of an entry that is safe to drop (of
// policy only, unless nil): among the first evictSample entries from the
// hand, the one closest to its reset, because its loss over-admits the least;
// if none is safe, the first safe one within sampleReach. It returns -1 when
// there is none, with the wait until the earliest sampled entry becomes safe,
// and, of the sampled entries the compact part holds exactly, the one closest
// to its reset (-1: none).
func (sh *shard) pickSafe(now int64, only *usage) (victim, compact int32, soonest int64) {
	n := len(sh.owned)
	if n == 0 {
		return -1, -1, 0
	}
	if sh.hand >= n {
		sh.hand = 0
	}
	victim, compact = -1, -1
	for k := 0; k < min(sampleReach, n); k++ {
		if k >= evictSample && victim >= 0 {
			break
		}
		pos := sh.owned[(sh.hand+k)%n]
		e := sh.at(pos)
		if e.pinned || only != nil && e.usage != only {
			continue
		}
		if e.safeAt > now {
			if soonest == 0 || e.safeAt-now < soonest {
				soonest = e.safeAt - now
			}
			if e.compact() && (compact < 0 || e.expires < sh.at(compact).expires) {
				compact = pos
			}
			continue
		}
		if victim < 0 || e.expires < sh.at(victim).expires {
			victim = pos
		}
	}
	sh.hand = (sh.hand + evictSample) % n
	return victim, compact, soonest
}

// remove forgets the entry at pos and frees its position.
func (sh *shard) remove(pos int32) {
	e := sh.at(pos)
	sh.index.remove(e.tag, pos)
	bytes := entryBytes(e.key.len(), e.logCap)
	sh.bytes -= bytes
	e.usage.release(bytes)
	if e.alg == concurrencyIndex {
		delete(sh.slots, pos)
	}
	*e = entry{} // drop references for the GC
	sh.give(pos)
}

// nextLogCap is the capacity of the log buffer after a decision that started
// from a log of capacity c holding oldLen entries and left next: sluice.Log
// doubles its buffer (to at least 4) when an admission finds it full, and
// never shrinks it. (TestLogCapTracksBuffer checks this against the buffer.)
// alg is the state's algorithmIndex: only a sliding log has a buffer, and
// asking another state's empty Log its length would copy the Log, a stall on
// every decision.
func nextLogCap(alg uint8, c logCapacity, oldLen int, next *sluice.State, admitted bool) logCapacity {
	switch {
	case alg != slidingLogIndex || next.Log.Len() == 0:
		return 0
	case admitted && oldLen == int(c):
		return max(4, 2*c)
	}
	return c
}
