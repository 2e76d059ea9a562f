// Package memory is Sluice's embedded, in-process store: the default when one
// process enforces its own limits, and the local fallback when Redis fails.
//
// State lives in lock-striped shards so cores rarely contend on one mutex. A
// decision on an existing key allocates nothing.
//
// Memory is bounded in keys (WithMaxKeys) and bytes (WithMaxBytes), and the
// bounds never buy an attacker a victim's quota, nor lock new users out. A
// key whose state is back to initial is forgotten. Keys are held in two
// parts. The exact part holds each key with its state, as long as it has
// room (WithMaxKeys, and half the byte budget); under pressure it forgets
// only state that is safe to drop: a key that has used at most 1/64 of its
// capacity (nothing at all when the capacity is under 64), preferring the one
// closest to its reset. Each policy has a fair share of it; a policy over its
// share may use at most 7/8 and replace only its own state, so flooding one
// policy with new keys never crowds out another's.
//
// A key the exact part has no room for goes to the compact part, which holds
// its state in 16 bytes without the key, in a fixed table sized from the
// other half of the byte budget: exactly for every algorithm (a sliding log
// of several entries as one entry of their sum at the newest one's time). Keys
// that share a slot, and states folded into a bucket's floor when the table
// overflows, are counted with at least their own units, never fewer: the
// compact part may deny more than the exact one, never admit more. A key in
// use moves back to the exact part when it has room, or when a key there the
// compact part holds exactly can move the other way. docs/semantics.md (rule 6)
// and docs/operations.md give the bounds; Stats counts what happens.
package memory

import (
	"context"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultMaxKeys is the number of keys a Store holds unless WithMaxKeys says
// otherwise.
const DefaultMaxKeys = 1 << 20

// DefaultMaxBytes is the memory a Store's keys may take unless WithMaxBytes
// says otherwise: each key is charged its length, a fixed overhead and its
// sliding_log entries (see docs/operations.md for the RSS this gives).
const DefaultMaxBytes = 256 << 20

const maxShards = 64

// Store is the in-memory store. The zero value is not usable; call New.
type Store struct {
	shards        []shard
	arena         *arena // every shard's entries
	mask          uint64
	perShard      int
	perShardBytes int64
	maxKeys       int
	maxBytes      int64
	exactBytes    int64 // what of maxBytes the exact part may take: the rest is the compact part's
	seed          maphash.Seed
	clock         sluice.Clock // nil: the monotonic clock, from anchor
	anchor        time.Time
	anchorMicros  int64
	budgets       budgets
	colds         coldIDs
	coldBuckets   int // per shard; 0: no compact part
	evicted       atomic.Uint64
	refused       atomic.Uint64
	spilled       atomic.Uint64
	demoted       atomic.Uint64
	folded        atomic.Uint64
	pressure      pressure
	boards        boards
	// compactFirst (set by tests only) keeps every new state the compact part
	// holds exactly there, so that the conformance suite runs through it.
	compactFirst bool
}

var (
	_ sluice.Store    = (*Store)(nil)
	_ sluice.Resetter = (*Store)(nil)
)

// Option configures a Store.
type Option func(*config)

type config struct {
	clock    sluice.Clock
	maxKeys  int
	maxBytes int64
	log      *slog.Logger
}

// WithClock makes the store read time from c instead of the monotonic system
// clock. Tests use it to control time.
func WithClock(c sluice.Clock) Option { return func(cf *config) { cf.clock = c } }

// WithMaxKeys bounds the number of keys held (1 ≤ n ≤ math.MaxInt32).
// Default DefaultMaxKeys.
func WithMaxKeys(n int) Option { return func(cf *config) { cf.maxKeys = min(max(1, n), maxPositions) } }

// WithMaxBytes bounds the bytes the keys take, as charged: each key twice its
// length (for the allocator's rounding and fragmentation) plus a fixed
// overhead per key plus 16 bytes per sliding_log entry it holds.
// Default DefaultMaxBytes; at least one long key's worth.
func WithMaxBytes(n int64) Option {
	return func(cf *config) { cf.maxBytes = max(entryBytes(sluice.MaxKeyLen, 0), n) }
}

// New returns an empty Store.
func New(opts ...Option) *Store {
	cf := config{maxKeys: DefaultMaxKeys, maxBytes: DefaultMaxBytes}
	for _, o := range opts {
		o(&cf)
	}
	cold := coldBytes(cf.maxKeys, cf.maxBytes)
	// Each shard should hold a fair number of keys, or uneven hashing would make
	// the bound much tighter than asked for.
	n := maxShards
	for n > 1 && min(int64(cf.maxKeys), (cf.maxBytes-cold)/entryOverhead)/int64(n) < 64 {
		n /= 2
	}
	coldBuckets := int(cold / coldBucketBytes / int64(n))
	exactBytes := cf.maxBytes - int64(coldBuckets*n)*coldBucketBytes
	s := &Store{
		shards:        make([]shard, n),
		arena:         new(arena),
		mask:          uint64(n - 1),
		perShard:      max(1, cf.maxKeys/n),
		perShardBytes: exactBytes / int64(n),
		maxKeys:       cf.maxKeys,
		maxBytes:      cf.maxBytes,
		exactBytes:    exactBytes,
		seed:          maphash.MakeSeed(),
		clock:         cf.clock,
		anchor:        time.Now(),
		coldBuckets:   coldBuckets,
	}
	s.pressure.log = cf.log
	s.anchorMicros = s.anchor.UnixMicro()
	for i := range s.shards {
		s.shards[i].arena = s.arena
	}
	return s
}

// now returns the store's time in microseconds since the epoch. Without a
// Clock it reads the monotonic clock anchored to the wall clock once, like
// sluice.SystemClock, without building a time.Time per call.
func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock.Now().UnixMicro()
	}
	return s.anchorMicros + int64(time.Since(s.anchor)/time.Microsecond)
}

// Close returns nil: the store holds no connection or goroutine to release.
// It is there so that every store of this module is an io.Closer, closed the
// same way. A closed memory store still decides.
func (s *Store) Close() error { return nil }

// Decide implements sluice.Store.
func (s *Store) Decide(_ context.Context, req sluice.Request) (res sluice.Result, err error) {
	// apply writes into the named result itself: a local Result returned
	// would be copied once more, with wide loads over the narrow stores just
	// made, which stall.
	s.apply(req.Policy, req.Key, req.Cost, req.Cost > 0, nil, &res)
	return res, nil
}

// op is what apply does to a state at now other than a decision: a
// reservation, a release or a charge. A concrete type rather than a func value lets the
// compiler see that the state apply hands it stays on apply's stack.
type op struct {
	kind   opKind
	req    sluice.Request
	upTo   int64              // opReserve: the most units to admit
	r      sluice.Reservation // opReserve: the reservation made; opRelease: the one to give back
	unused int64              // opRelease: the units to give back
}

type opKind uint8

const (
	opReserve opKind = iota
	opRelease
	opCharge
)

// run changes *st in place and writes into *res the Result the entry's expiry
// follows.
func (o *op) run(st *sluice.State, now int64, res *sluice.Result) {
	switch o.kind {
	case opReserve:
		*st, o.r = sluice.Reserve(o.req.Policy, *st, now, o.req.Cost, o.upTo)
		*res = o.r.Result
		return
	case opCharge:
		sluice.ChargeInPlace(o.req.Policy, st, now, o.req.Cost, res)
		return
	}
	*st = sluice.Refund(o.req.Policy, *st, now, o.r, o.unused) // opRelease
	sluice.DecideInPlace(o.req.Policy, st, now, 0, res)        // for the new expiry
}

// apply replaces the state of (p, key) with what o makes of it at the
// store's now, under the shard lock, and stores it within the bounds; with o
// nil, the common case, it decides a request of cost units itself, without
// building an op or calling through one.
// The state is changed in a copy (cheaper than passing states by value), so
// a refusal keeps the stored one. consumes says whether an allowed result
// consumed units (a log's buffer may grow). It writes the result into *res
// (the caller's, rather than a copy per call returned through each). When the
// bounds leave no room it stores nothing and writes the denial instead,
// returning false.
func (s *Store) apply(p *sluice.Policy, key string, cost int64, consumes bool, o *op, res *sluice.Result) (applied bool) {
	now := s.now()
	var id entryKey
	id.set(p, key)
	h := s.hash(&id)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	i, found := sh.find(h, &id)
	if !found {
		applied = s.applyAbsent(sh, h, p, &id, cost, consumes, o, res, now)
		sh.mu.Unlock()
		s.pressure.report(s, now)
		return applied
	}
	e := sh.at(i)
	var next sluice.State
	e.load(&next)
	logCap := e.logCap
	oldLen := 0 // next.Log.Len(), without copying the Log to ask
	if e.log != nil {
		oldLen = e.log.Len()
	}
	if o == nil {
		sluice.DecideInPlace(p, &next, now, cost, res)
	} else {
		o.run(&next, now, res)
	}
	applied = true
	switch {
	case res.ResetAfter == 0: // back to initial: nothing to keep
		sh.remove(i)
	case o == nil && (cost == 0 || !res.Allowed):
		sh.keep(i, p, res, now) // a peek or a denial leaves the state as it was
	default:
		logCap = o.nextLogCap(id.alg, logCap, oldLen, &next, res.Allowed && consumes)
		if logCap > e.logCap {
			var grown bool
			if grown, applied = s.growLog(sh, i, h, p, &next, logCap, now, res); !grown {
				break
			}
		}
		sh.update(i, p, &next, res, now, logCap)
	}
	sh.mu.Unlock()
	return applied
}

// Reset implements sluice.Resetter: it forgets the state of (p, key).
func (s *Store) Reset(_ context.Context, p *sluice.Policy, key string) error {
	var id entryKey
	id.set(p, key)
	h := s.hash(&id)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	if i, ok := sh.find(h, &id); ok {
		sh.remove(i)
	}
	// Its compact state too, with any other key's that shares its slots: a
	// reset forgives, and sharing is rare (see coldTable).
	if u := s.budgets.lookup(p.Name); u != nil && sh.cold != nil {
		if cid := u.coldIDs[id.alg].Load(); cid != 0 {
			r := sh.cold.ref(h, cid)
			sh.cold.clear(&r)
		}
	}
	sh.mu.Unlock()
	return nil
}

// Len returns the number of keys the exact part holds (Stats counts the
// compact part's too).
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.owned)
		sh.mu.Unlock()
	}
	return n
}

// TTL returns how long the state of the policy named policy and key is kept if
// nothing else happens — its ResetAfter — and false when the store holds none.
// A name used with several algorithms has a state for each: TTL reports the
// first it finds, in the order of sluice.Algorithms, then Concurrency's. For
// a state in the compact part it is how long its slot is kept: not less than
// its ResetAfter, up to a period (or two, for sliding_window) more.
func (s *Store) TTL(policy, key string) (time.Duration, bool) {
	now := s.now()
	u := s.budgets.lookup(policy)
	for _, a := range stateAlgorithms {
		id := entryKey{policy: policy, alg: algorithmIndex(a), key: key}
		h := s.hash(&id)
		sh := &s.shards[h&s.mask]
		sh.mu.Lock()
		var expires int64
		if i, ok := sh.find(h, &id); ok {
			expires = sh.at(i).expires
		} else if u != nil && sh.cold != nil {
			expires = sh.cold.keptUntil(&s.colds, h, u.coldIDs[id.alg].Load())
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
func (s *Store) hash(id *entryKey) uint64 {
	// Two one-shot hashes are cheaper than streaming both strings through a
	// maphash.Hash; the rotation keeps (p, k) and (k, p) apart.
	//
	// The algorithm only separates one name's states, which find tells apart
	// anyway, so a fixed constant per algorithm is mixing enough and costs no
	// third hash.
	return s.mix(maphash.String(s.seed, id.key), id.policy, id.alg)
}

// mix is hash given the key's own hash.
func (s *Store) mix(keyHash uint64, policy string, alg uint8) uint64 {
	return keyHash ^ bits.RotateLeft64(maphash.String(s.seed, policy), 29) ^
		uint64(2*alg+1)*0x9e3779b97f4a7c15 // a distinct odd multiple of the golden ratio
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
