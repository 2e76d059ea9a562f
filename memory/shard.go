package memory

import (
	"strings"
	"sync"

	"github.com/sluicehq/sluice"
)

// shard is one lock stripe: a dense slice of entries and an index into it. The
// dense slice makes sweeping and sampling for eviction cheap. The index is keyed
// by the entry's 64-bit hash, which is cheaper than hashing two strings again;
// the rare key whose hash is already taken by another lives in spill.
type shard struct {
	mu      sync.Mutex
	index   map[uint64]int32
	spill   map[entryKey]int32 // nil until a collision happens
	entries []entry
	hand    int      // where the next sweep or eviction sample starts
	_       [64]byte // keep neighbouring shards' mutexes off one cache line
}

// entryKey identifies a state: like a Redis key, it holds the policy's name and
// algorithm, so two policies of one name and different algorithms keep
// separate states, as on every store.
type entryKey struct {
	policy string
	alg    sluice.Algorithm
	key    string
}

func idOf(p *sluice.Policy, key string) entryKey {
	return entryKey{policy: p.Name, alg: p.Algorithm, key: key}
}

type entry struct {
	id      entryKey
	hash    uint64
	spilled bool  // indexed in spill, not index
	expires int64 // microseconds; the state is initial from then on
	state   sluice.State
}

// sweepPerInsert is how many entries each insertion checks for expiry. Two keep
// the shard within about twice its live keys without a background goroutine.
const sweepPerInsert = 2

// evictSample is how many entries are compared when a full shard must evict.
const evictSample = 8

// put stores the state a decision produced. An initial state (ResetAfter 0) is
// not kept.
// find returns the position of id's entry.
func (sh *shard) find(h uint64, id entryKey) (int32, bool) {
	i, ok := sh.index[h]
	if ok && sh.entries[i].id == id {
		return i, true
	}
	if sh.spill == nil {
		return 0, false
	}
	i, ok = sh.spill[id]
	return i, ok
}

func (sh *shard) setIndex(e *entry, i int32) {
	if e.spilled {
		sh.spill[e.id] = i
	} else {
		sh.index[e.hash] = i
	}
}

func (sh *shard) put(h uint64, id entryKey, found bool, i int32, st sluice.State, now int64, res sluice.Result, limit int) {
	if res.ResetAfter == 0 {
		if found {
			sh.remove(int(i))
		}
		return
	}
	expires := now + res.ResetAfter.Microseconds()
	if found {
		e := &sh.entries[i]
		// After a clock step backwards ResetAfter counts from the instant
		// the state was last at; never forget it earlier than before.
		e.expires, e.state = max(expires, e.expires), st
		return
	}
	sh.sweep(now, sweepPerInsert)
	if len(sh.entries) >= limit {
		sh.evict()
	}
	// A clone keeps a stored key from pinning the caller's buffer (a request
	// header, say) for as long as the key lives.
	id.key = strings.Clone(id.key)
	e := entry{id: id, hash: h, expires: expires, state: st}
	if _, taken := sh.index[h]; taken {
		e.spilled = true
		if sh.spill == nil {
			sh.spill = make(map[entryKey]int32)
		}
	}
	sh.entries = append(sh.entries, e)
	sh.setIndex(&sh.entries[len(sh.entries)-1], int32(len(sh.entries)-1))
}

// sweep checks up to n entries from the hand and forgets the expired ones.
func (sh *shard) sweep(now int64, n int) {
	for ; n > 0 && len(sh.entries) > 0; n-- {
		if sh.hand >= len(sh.entries) {
			sh.hand = 0
		}
		if sh.entries[sh.hand].expires <= now {
			sh.remove(sh.hand) // the last entry moved here; check it next
		} else {
			sh.hand++
		}
	}
}

// evict forgets the entry with the earliest expiry among a sample: the key
// closest to its reset, whose loss over-admits the least.
func (sh *shard) evict() {
	n := len(sh.entries)
	if sh.hand >= n {
		sh.hand = 0
	}
	victim := sh.hand
	for k := 1; k < evictSample && k < n; k++ {
		j := (sh.hand + k) % n
		if sh.entries[j].expires < sh.entries[victim].expires {
			victim = j
		}
	}
	sh.hand = (sh.hand + evictSample) % n
	sh.remove(victim)
}

// remove deletes entry i by moving the last entry into its place.
func (sh *shard) remove(i int) {
	last := len(sh.entries) - 1
	if e := &sh.entries[i]; e.spilled {
		delete(sh.spill, e.id)
	} else {
		delete(sh.index, e.hash)
	}
	if i != last {
		sh.entries[i] = sh.entries[last]
		sh.setIndex(&sh.entries[i], int32(i))
	}
	sh.entries[last] = entry{} // drop references for the GC
	sh.entries = sh.entries[:last]
}
