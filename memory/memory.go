// Package memory is Sluice's embedded, in-process store: the default when one
// process enforces its own limits, and the local fallback when Redis fails.
//
// State lives in lock-striped shards so cores rarely contend on one mutex. A
// decision on an existing key allocates nothing. Memory is bounded: a key whose
// state is back to initial is forgotten, and at most WithMaxKeys keys are held;
// when a shard is full, the key closest to its reset is evicted first, because
// forgetting it admits the least extra traffic.
package memory

import (
	"context"
	"hash/maphash"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultMaxKeys is the number of keys a Store holds unless WithMaxKeys says
// otherwise: about 200 MB with short keys (see docs/algorithms.md).
const DefaultMaxKeys = 1 << 20

const maxShards = 64

// Store is the in-memory store. The zero value is not usable; call New.
type Store struct {
	shards   []shard
	mask     uint64
	perShard int
	seed     maphash.Seed
	now      func() int64 // microseconds since the epoch
}

var (
	_ sluice.Store    = (*Store)(nil)
	_ sluice.Resetter = (*Store)(nil)
)

// Option configures a Store.
type Option func(*config)

type config struct {
	clock   sluice.Clock
	maxKeys int
}

// WithClock makes the store read time from c instead of the monotonic system
// clock. Tests use it to control time.
func WithClock(c sluice.Clock) Option { return func(cf *config) { cf.clock = c } }

// WithMaxKeys bounds the number of keys held (n ≥ 1). Default DefaultMaxKeys.
func WithMaxKeys(n int) Option { return func(cf *config) { cf.maxKeys = max(1, n) } }

// New returns an empty Store.
func New(opts ...Option) *Store {
	cf := config{maxKeys: DefaultMaxKeys}
	for _, o := range opts {
		o(&cf)
	}
	// Each shard should hold a fair number of keys, or uneven hashing would make
	// the bound much tighter than asked for.
	n := maxShards
	for n > 1 && cf.maxKeys/n < 64 {
		n /= 2
	}
	s := &Store{
		shards:   make([]shard, n),
		mask:     uint64(n - 1),
		perShard: max(1, cf.maxKeys/n),
		seed:     maphash.MakeSeed(),
		now:      monotonicMicros(),
	}
	if cf.clock != nil {
		clock := cf.clock
		s.now = func() int64 { return clock.Now().UnixMicro() }
	}
	for i := range s.shards {
		s.shards[i].index = make(map[uint64]int32)
	}
	return s
}

// monotonicMicros reads the monotonic clock anchored to the wall clock once, like
// sluice.SystemClock, without building a time.Time per call.
func monotonicMicros() func() int64 {
	anchor := time.Now()
	base := anchor.UnixMicro()
	return func() int64 { return base + int64(time.Since(anchor)/time.Microsecond) }
}

// Decide implements sluice.Store.
func (s *Store) Decide(_ context.Context, req sluice.Request) (sluice.Result, error) {
	now := s.now()
	id := idOf(req.Policy, req.Key)
	h := s.hash(id)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	i, found := sh.find(h, id)
	var st sluice.State
	if found {
		st = sh.entries[i].state
	}
	next, res := sluice.Decide(req.Policy, st, now, req.Cost)
	sh.put(h, id, found, i, next, now, res, s.perShard)
	sh.mu.Unlock()
	return res, nil
}

// DecideAll implements sluice.Store: it locks every shard involved (in index
// order, so concurrent batches cannot deadlock), decides each request on the
// current state, and commits only if all were admitted.
func (s *Store) DecideAll(_ context.Context, reqs []sluice.Request, results []sluice.Result) error {
	now := s.now()
	ids := make([]entryKey, len(reqs))
	hashes := make([]uint64, len(reqs))
	shardIdx := make([]int, len(reqs))
	states := make([]sluice.State, 2*len(reqs))
	old, next := states[:len(reqs)], states[len(reqs):]
	locked := make([]int, 0, len(reqs))
	for i, r := range reqs {
		ids[i] = idOf(r.Policy, r.Key)
		hashes[i] = s.hash(ids[i])
		shardIdx[i] = int(hashes[i] & s.mask)
		locked = insertSorted(locked, shardIdx[i])
	}
	for _, k := range locked {
		s.shards[k].mu.Lock()
	}
	defer func() {
		for _, k := range locked {
			s.shards[k].mu.Unlock()
		}
	}()

	allowed := true
	var retry time.Duration
	for i, r := range reqs {
		sh := &s.shards[shardIdx[i]]
		if j, ok := sh.find(hashes[i], ids[i]); ok {
			old[i] = sh.entries[j].state
		}
		next[i], results[i] = sluice.Decide(r.Policy, old[i], now, r.Cost)
		if !results[i].Allowed {
			allowed = false
			retry = max(retry, results[i].RetryAfter)
		}
	}
	if !allowed {
		// Nothing is consumed: report each limit as it stands (a peek), with the
		// wait after which the whole batch passes.
		for i, r := range reqs {
			_, results[i] = sluice.Decide(r.Policy, old[i], now, 0)
			results[i].Allowed = false
			results[i].RetryAfter = retry
		}
		return nil
	}
	for i := range reqs {
		sh := &s.shards[shardIdx[i]]
		j, found := sh.find(hashes[i], ids[i])
		sh.put(hashes[i], ids[i], found, j, next[i], now, results[i], s.perShard)
	}
	return nil
}

// Reset implements sluice.Resetter: it forgets the state of (p, key), which
// belongs to p's name and algorithm.
func (s *Store) Reset(_ context.Context, p *sluice.Policy, key string) error {
	id := idOf(p, key)
	h := s.hash(id)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	if i, ok := sh.find(h, id); ok {
		sh.remove(int(i))
	}
	sh.mu.Unlock()
	return nil
}

// Len returns the number of keys held.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.entries)
		sh.mu.Unlock()
	}
	return n
}

// TTL returns how long the state of the policy named policy and key is kept if
// nothing else happens — its ResetAfter — and false when the store holds none.
// A name used with several algorithms has a state for each: TTL reports the
// first it finds, in the order of sluice.Algorithms.
func (s *Store) TTL(policy, key string) (time.Duration, bool) {
	now := s.now()
	for _, a := range sluice.Algorithms {
		id := entryKey{policy: policy, alg: a, key: key}
		h := s.hash(id)
		sh := &s.shards[h&s.mask]
		sh.mu.Lock()
		var expires int64
		if i, ok := sh.find(h, id); ok {
			expires = sh.entries[i].expires
		}
		sh.mu.Unlock()
		if expires > now {
			return time.Duration(expires-now) * time.Microsecond, true
		}
	}
	return 0, false
}

// hash is computed once per decision: its low bits pick the shard, and the
// shard indexes entries by it. The seed is random per store, so nobody can pick
// keys that collide.
func (s *Store) hash(id entryKey) uint64 {
	// Two one-shot hashes are cheaper than streaming both strings through a
	// maphash.Hash; the rotation keeps (p, k) and (k, p) apart. The algorithm
	// only separates one name's states, which find tells apart anyway, so a
	// fixed constant per algorithm is mixing enough and costs no third hash.
	return maphash.String(s.seed, id.key) ^ bits.RotateLeft64(maphash.String(s.seed, id.policy), 29) ^
		algorithmMix(id.alg)
}

// algorithmMix is a distinct odd multiple of the golden ratio per algorithm.
func algorithmMix(a sluice.Algorithm) uint64 {
	for i, b := range sluice.Algorithms {
		if a == b {
			return uint64(2*i+1) * 0x9e3779b97f4a7c15
		}
	}
	return 0
}

func insertSorted(xs []int, x int) []int {
	for i, y := range xs {
		if y == x {
			return xs
		}
		if y > x {
			xs = append(xs, 0)
			copy(xs[i+1:], xs[i:])
			xs[i] = x
			return xs
		}
	}
	return append(xs, x)
}
