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
	unspent   []*lease           // leases that held units when last reserved (listed)
	decisions int64              // decided through a lease (from it or by reserving)
	_         [16]byte           // a cache line of its own
}

func (s *Store) shardOf(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&(numShards-1)]
}

// get returns the lease of id, creating it under p; sh is locked and open.
func (sh *shard) get(id leaseID, p *sluice.Policy) *lease {
	l := sh.leases[id]
	if l == nil {
		l = &lease{id: id, sh: sh, policy: *p, key: id.key, size: 1}
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

// forgetRounds: every forgetRounds-th sweep walks all leases, to forget the
// idle ones; the others look only at the leases that hold units. Walking
// 10,000 leases every 10ms cost a serve node a tenth of its CPU.
const forgetRounds = 100

// sweepDue gives back the expired leases of idle keys, at most once per
// sweepEvery, and forgets leases idle for longer than their TTL (checking
// all of them once per forgetRounds sweeps). The caller that finds a sweep
// due does it; the others pay one atomic load.
func (s *Store) sweepDue(ctx context.Context, now int64) {
	next := s.nextSweep.Load()
	if now < next || !s.nextSweep.CompareAndSwap(next, now+s.sweepEvery.Microseconds()) {
		return
	}
	all := s.sweeps.Add(1)%forgetRounds == 1
	var back []giveBack
	for i := range s.shards {
		back = s.shards[i].sweep(now, all, back)
	}
	for _, g := range back {
		s.giveBack(ctx, g)
	}
}

// sweep retires sh's idle leases among those holding units, or among all
// of them, and appends what they held to back.
func (sh *shard) sweep(now int64, all bool, back []giveBack) []giveBack {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if all {
		for _, l := range sh.leases {
			back = sh.retireIdle(l, now, back)
		}
	}
	kept := sh.unspent[:0]
	for _, l := range sh.unspent {
		if !l.retired && l.left > 0 {
			if back = sh.retireIdle(l, now, back); !l.retired {
				kept = append(kept, l)
				continue
			}
		}
		l.listed = false
	}
	clear(sh.unspent[len(kept):])
	sh.unspent = kept
	return back
}

// retireIdle removes l from sh, which is locked, when it has expired, is not
// remembering a denial and is not being reserved for; what it held is
// appended to back.
func (sh *shard) retireIdle(l *lease, now int64, back []giveBack) []giveBack {
	if now < l.expires || now < l.deniedUntil || !l.mu.TryLock() {
		return back
	}
	defer l.mu.Unlock()
	l.retired = true
	delete(sh.leases, l.id)
	if g := l.takeBack(now); g.unused > 0 {
		back = append(back, g)
	}
	return back
}

// listUnspent puts l, which holds units now, on its shard's list for the
// sweep; the shard is locked.
func (l *lease) listUnspent() {
	if l.left > 0 && !l.listed {
		l.listed = true
		l.sh.unspent = append(l.sh.unspent, l)
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
		sh.leases, sh.unspent = nil, nil
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
