package memory

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// What may be forgotten. Memory is bounded, so under pressure some state must
// go; but forgetting a key re-admits whatever it had used, so only state that
// is back to, or within a sliver of, initial is ever dropped before its reset:
// a key that has used at most Capacity/safeSlackDivisor units (rounded down, so
// 0 for capacities under 64 — a 5-per-15-minutes login limit is never dropped
// while it counts anything). When nothing in reach is safe to drop, a new key is
// denied instead of admitted uncounted.
const safeSlackDivisor = 64

// entryOverhead is what one key costs besides its bytes: its entry in the
// arena, its place in its shard's list of positions (with append's slack), its
// index slot and its share of the shard. Measured with internal/cmd/memrss.
const entryOverhead = 256

// keyBytesFactor: a key is charged twice its length. Its copy takes its length
// rounded up to an allocation size, and as keys come and go their copies share
// the allocator's spans with freed ones (and with the requests' own garbage):
// internal/cmd/memrss measured the heap at 2.2× the key bytes held with 1,000-byte
// keys under rotation.
const keyBytesFactor = 2

// logEntryBytes is the size of one sliding_log entry (sluice.LogEntry).
const logEntryBytes = 16

// evictionsPerInsert bounds the safe entries one new key may evict to make room
// (a long key may need several short ones' room).
const evictionsPerInsert = 8

// reservedShare is the part of each shard kept for policies under their fair
// share: a policy holding at least its share of the store stops growing at
// 1-1/reservedShare of each shard, so one policy's flood of keys that are not
// safe to drop cannot deny every other policy (even one not seen yet) its new
// keys.
const reservedShare = 8

// The compact part (coldTable) takes up to 1/coldShare of the byte budget,
// and up to coldSlotsPerKey slots per key of WithMaxKeys when that bounds the
// store first: a flood of ten times the keys the exact part holds then still
// leaves room in every bucket (docs/operations.md has the numbers). The
// exact part keeps at least one long key's worth.
const coldShare, coldSlotsPerKey = 2, 16

// coldBytes is how much of the byte budget the compact part takes.
func coldBytes(maxKeys int, maxBytes int64) int64 {
	byKeys := int64(maxKeys) * coldSlotsPerKey / coldBucketSlots * coldBucketBytes
	return max(0, min(maxBytes/coldShare, byKeys, maxBytes-entryBytes(sluice.MaxKeyLen, 0)))
}

// entryBytes is what the byte budget charges for one key.
func entryBytes(keyLen int, logCap logCapacity) int64 {
	return entryOverhead + keyBytesFactor*int64(keyLen) + int64(logCap)*logEntryBytes
}

// usage counts one policy's keys and bytes across all shards. Its entries
// hold it instead of the policy's name, which every decision compares: the
// padding keeps the counters, which every shard writes on an insertion, off
// the name's cache line.
type usage struct {
	name        string
	_           [48]byte
	keys, bytes atomic.Int64
	coldIDs     [7]atomic.Uint32 // by algorithmIndex: the policy's id in the compact part; 0 until it has one (never for concurrency)
}

func (u *usage) add(bytes int64) {
	u.keys.Add(1)
	u.bytes.Add(bytes)
}

func (u *usage) release(bytes int64) {
	u.keys.Add(-1)
	u.bytes.Add(-bytes)
}

// budgets holds every policy's usage, by policy name (the identity of its
// state). It is looked up only when a new key is stored, never on a decision
// about an existing key.
type budgets struct {
	byName sync.Map     // string → *usage
	seen   atomic.Int64 // policies that ever stored a key
}

// lookup returns policy's usage if it ever stored a key, else nil.
func (b *budgets) lookup(policy string) *usage {
	if u, ok := b.byName.Load(policy); ok {
		return u.(*usage)
	}
	return nil
}

func (b *budgets) usage(policy string) *usage {
	if u, ok := b.byName.Load(policy); ok {
		return u.(*usage)
	}
	u, loaded := b.byName.LoadOrStore(policy, &usage{name: policy})
	if !loaded {
		b.seen.Add(1)
	}
	return u.(*usage)
}

// overShare reports whether u's policy holds at least its fair share: the
// exact part's bounds divided among the policies seen, and never more than half,
// so that room is kept for a policy that has not come yet.
func (s *Store) overShare(u *usage) bool {
	n := max(s.budgets.seen.Load(), 2)
	return u.keys.Load() >= int64(s.maxKeys)/n || u.bytes.Load() >= s.exactBytes/n
}

// safeAt returns the instant from which the state a decision left behind may
// be forgotten: at once if it has used at most the slack; for the buckets, once
// enough has drained (their missing credit falls linearly by one unit per
// emission interval, reaching 0 at expires); for the windows and the log, at
// their reset.
func safeAt(p *sluice.Policy, res *sluice.Result, now, expires int64) int64 {
	capacity := p.Capacity()
	slack := capacity / safeSlackDivisor
	if capacity-max(res.Remaining, 0) <= slack {
		return now
	}
	switch p.Algorithm {
	case sluice.TokenBucket, sluice.LeakyBucket, sluice.GCRA:
		return expires - slack*p.EmissionInterval().Microseconds()
	}
	return expires
}

// makeRoom evicts safe entries until the shard can take keys more keys and
// bytes more bytes for the policy of u, and reports whether it can. With
// demote, when none in reach is safe to drop it moves one the compact part
// holds exactly there instead (see demote). When it cannot, it returns how
// long until a sampled entry becomes safe to drop.
func (s *Store) makeRoom(sh *shard, u *usage, keys int, bytes int64, now int64, demote bool) (bool, int64) {
	keyLimit, byteLimit := s.perShard, s.perShardBytes
	var only *usage // an over-share policy may replace only its own state
	if s.overShare(u) {
		keyLimit -= keyLimit / reservedShare
		byteLimit -= byteLimit / reservedShare
		only = u
	}
	for tries := 0; len(sh.owned)+keys > keyLimit || sh.bytes+bytes > byteLimit; tries++ {
		if tries == evictionsPerInsert {
			return false, 0
		}
		victim, compact, wait := sh.pickSafe(now, only)
		switch {
		case victim >= 0:
			if sh.at(victim).expires > now { // not merely expired
				s.evicted.Add(1)
			}
			sh.remove(victim)
		case !demote || compact < 0 || !s.demote(sh, compact, now):
			return false, wait
		}
	}
	return true, 0
}

// refusal is the answer to a decision the store cannot hold state for: denied,
// never admitted uncounted, with a RetryAfter of when room is expected (between
// a millisecond and the policy's period).
func (s *Store) refusal(p *sluice.Policy, wait int64) sluice.Result {
	s.refused.Add(1)
	retry := time.Duration(wait) * time.Microsecond
	if retry <= 0 || retry > p.Period {
		retry = p.Period
	}
	retry = max(retry, time.Millisecond)
	return sluice.Result{Limit: p.Limit, RetryAfter: retry, ResetAfter: retry}
}

// Stats is a snapshot of the store's use of its bounds.
type Stats struct {
	Keys     int   // keys held
	Bytes    int64 // bytes charged against MaxBytes
	MaxKeys  int   // the WithMaxKeys bound
	MaxBytes int64 // the WithMaxBytes bound
	// Evicted counts keys forgotten before their reset to make room; each
	// had used at most 1/64 of its capacity (see the package doc).
	Evicted uint64
	// Refused counts decisions denied because the store had no room for the
	// key's state: only when the store has no compact part (a byte budget
	// too small for one) or the policy no id in it (past maxColdIDs).
	Refused uint64
	// ColdKeys is how many states the compact part holds (some of them may
	// have expired and wait to be reused); ColdSlots how many it can hold.
	ColdKeys, ColdSlots int
	// Spilled counts new keys kept in the compact part because the exact
	// part was full with nothing safe to drop: the store is under pressure.
	Spilled uint64
	// Demoted counts keys moved, exactly, from the exact part to the compact
	// part to make room for a key in use.
	Demoted uint64
	// Folded counts states folded into a floor because both of a key's
	// buckets were full: from then on the keys of that bucket are counted
	// with more than their own units (never fewer). Rising, it means the
	// compact part is full too.
	Folded uint64
}

// Stats returns the store's current use of its bounds and its pressure
// counters. Refused rising means a flood of keys the store will not forget:
// those decisions were denied, not admitted.
func (s *Store) Stats() Stats {
	st := Stats{MaxKeys: s.maxKeys, MaxBytes: s.maxBytes, Evicted: s.evicted.Load(), Refused: s.refused.Load(),
		ColdSlots: s.coldBuckets * coldBucketSlots * len(s.shards),
		Spilled:   s.spilled.Load(), Demoted: s.demoted.Load(), Folded: s.folded.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += len(sh.owned)
		st.Bytes += sh.bytes
		if sh.cold != nil {
			st.ColdKeys += sh.cold.held
			st.Bytes += int64(s.coldBuckets) * coldBucketBytes
		}
		sh.mu.Unlock()
	}
	return st
}
