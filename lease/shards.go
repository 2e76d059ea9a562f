package lease

import (
	"context"
	"hash/maphash"
	"sync"

	"github.com/sluicehq/sluice"
)

// numShards stripes the leases over locks, so that callers on different
// keys rarely wait for each other (a power of two).
const numShards = 64

// shard holds some keys' leases. Its mu guards the map, the decision count
// and every lease's fields: a decision from a lease takes it once, briefly.
type shard struct {
	mu        sync.Mutex
	leases    map[leaseID]*lease // nil once the store is closed
	decisions int64              // decided through a lease (from it or by reserving)
	_         [40]byte           // a cache line of its own
}

func (s *Store) shardOf(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&(numShards-1)]
}

// get returns the lease of id, creating it under p; sh is locked and open.
func (sh *shard) get(id leaseID, p *sluice.Policy) *lease {
	l := sh.leases[id]
	if l == nil {
		l = &lease{sh: sh, policy: *p, key: id.key, size: 1}
		sh.leases[id] = l
	}
	return l
}

// Stats counts the store's work since New, and what it holds now.
type Stats struct {
	Decisions  int64 // requests decided (Decide and DecideAll)
	StoreCalls int64 // calls to the remote store (reservations, releases, decisions)
	Leases     int   // leases held, live or expired but not yet given back
	Held       int64 // units held unused in live leases: what this node can admit without the store
}

// Stats returns the counters, and counts what the leases hold.
func (s *Store) Stats() Stats {
	st := Stats{Decisions: s.remoteDecisions.Load(), StoreCalls: s.storeCalls.Load()}
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Decisions += sh.decisions
		st.Leases += len(sh.leases)
		for _, l := range sh.leases {
			if now < l.expires && !l.retired {
				st.Held += l.left
			}
		}
		sh.mu.Unlock()
	}
	return st
}

// Held returns the units this node holds unused for (p, key): what it can
// admit without asking the store, and what it would strand if it died.
func (s *Store) Held(p *sluice.Policy, key string) int64 {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.leases[leaseID{policy: p.Name, alg: p.Algorithm, key: key}]
	if l == nil || s.now() >= l.expires {
		return 0
	}
	return l.left
}

// sweepDue gives back the expired leases of idle keys, at most once per
// sweepEvery, and forgets leases idle for longer than their TTL. The caller
// that finds a sweep due does it; the others pay one atomic load.
func (s *Store) sweepDue(ctx context.Context, now int64) {
	next := s.nextSweep.Load()
	if now < next || !s.nextSweep.CompareAndSwap(next, now+s.sweepEvery.Microseconds()) {
		return
	}
	var back []giveBack
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, l := range sh.leases {
			// A lease being reserved for (mu held) is in use: not idle.
			if now >= l.expires && now >= l.deniedUntil && l.mu.TryLock() {
				l.retired = true
				delete(sh.leases, id)
				if g := l.takeBack(now); g.unused > 0 {
					back = append(back, g)
				}
				l.mu.Unlock()
			}
		}
		sh.mu.Unlock()
	}
	for _, g := range back {
		s.giveBack(ctx, g)
	}
}

// Close gives back every lease's unused units; later requests go to the
// remote store. It does not close the remote store.
func (s *Store) Close(ctx context.Context) {
	var all []*lease
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, l := range sh.leases {
			all = append(all, l)
		}
		sh.leases = nil
		sh.mu.Unlock()
	}
	now := s.now()
	for _, l := range all {
		l.mu.Lock() // after a reservation in flight
		l.sh.mu.Lock()
		l.retired = true
		g := l.takeBack(now)
		l.sh.mu.Unlock()
		s.giveBack(ctx, g)
		l.mu.Unlock()
	}
}
