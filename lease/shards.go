package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

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
	expiring  expiring           // leases that held units when installed, by expiry
	cold      coldTable          // the demand of keys without a lease
	decisions int64              // decided here: from a lease, by reserving, or (direct) by one store call
	direct    int64              // of those, sent to the store as they came: keys too cold to lease
	_         [8]byte            // a cache line of its own
}

func (s *Store) shardOf(key string) *shard {
	sh, _ := s.shardHash(key)
	return sh
}

// shardHash returns key's shard and hash.
func (s *Store) shardHash(key string) (*shard, uint64) {
	h := maphash.String(s.seed, key)
	return &s.shards[h&(numShards-1)], h
}

// get returns the lease of id, creating it under p; sh is locked and open.
// A new lease takes the key (tagged tag) out of the cold table.
func (sh *shard) get(id leaseID, p *sluice.Policy, tag uint64) *lease {
	l := sh.leases[id]
	if l == nil {
		l = &lease{mu: newKeyLock(), id: id, sh: sh, policy: *p}
		sh.leases[id] = l
		sh.cold.drop(tag)
	}
	return l
}

// Stats counts the store's work since New, and what it holds now.
type Stats struct {
	Decisions  int64 // requests decided (Decide and DecideAll)
	Direct     int64 // of those, sent to the store as they came: keys too cold to lease, algorithms not leased, batches
	StoreCalls int64 // calls to the remote store (reservations, releases, decisions)
	Releases   int64 // releases made: unused units given back
	Renewals   int64 // reservations made ahead, before a lease ran out, that came back with units
	Background int64 // store calls in flight in the background now (renewals, releases)
	Waited     int64 // decisions that waited for a store call
	Leases     int   // leases held, live or expired but not yet given back
	Held       int64 // units held unused in live leases: what this node can admit without the store
}

// Stats returns the counters, and counts what the leases hold.
func (s *Store) Stats() Stats {
	st := Stats{Decisions: s.remoteDecisions.Load(), Direct: s.remoteDecisions.Load(), StoreCalls: s.storeCalls.Load(),
		Releases: s.releases.Load(), Renewals: s.renewals.Load(), Background: s.background.Load(), Waited: s.waited.Load()}
	// The shards count their direct decisions, each one store call that
	// the decision waited for.
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Decisions += sh.decisions
		st.Direct += sh.direct
		st.StoreCalls += sh.direct
		st.Waited += sh.direct
		st.Leases += len(sh.leases)
		for _, l := range sh.leases {
			if !l.retired {
				st.Held += l.held(now)
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
	if l == nil {
		return 0
	}
	return l.held(s.now())
}

// forgetRounds: every forgetRounds-th sweep walks all leases, to forget the
// idle ones; the others look only at the leases due to expire holding units.
// Walking 10,000 leases every 10ms cost a serve node a tenth of its CPU.
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
	if len(back) == 0 {
		return
	}
	// In the background: the decision that happened to start the sweep does
	// not wait for the releases (against a stalled store, one timeout each).
	s.background.Add(1)
	go func() {
		defer s.background.Add(-1)
		for _, g := range back {
			s.giveBack(context.WithoutCancel(ctx), g)
		}
	}()
}

// sweep retires sh's idle leases among those that expired holding units, or
// among all of them, and appends what they held to back.
func (sh *shard) sweep(now int64, all bool, back []giveBack) []giveBack {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if all {
		for _, l := range sh.leases {
			back = sh.retireIdle(l, now, back)
		}
	}
	for len(sh.expiring) > 0 && sh.expiring[0].at <= now {
		l := sh.expiring.pop().l
		// A stale entry (the lease was renewed, spent or retired since) has
		// nothing to give back; a lease kept by a denial or a reservation in
		// flight, or whose key is still warm, is left to the walk over all
		// leases.
		if !l.retired && l.left > 0 {
			back = sh.retireIdle(l, now, back)
		}
	}
	return back
}

// retireIdle gives back what l holds, when it has expired, is not
// remembering a denial and is not being reserved for (sh is locked), by
// appending it to back when that pays; and removes l from sh unless its key
// is still warm, so that a key asking often keeps its demand.
func (sh *shard) retireIdle(l *lease, now int64, back []giveBack) []giveBack {
	if now < l.expires || now < l.deniedUntil || l.next != nil && now < l.next.expires() || !l.mu.TryLock() {
		return back
	}
	defer l.mu.Unlock()
	for _, g := range [2]giveBack{l.dropNext(now), l.takeBack(now)} { // newest first
		if g = l.worth(g, now); g.unused > 0 {
			back = append(back, g)
		}
	}
	if !l.demand.warm(now) {
		l.retired = true
		delete(sh.leases, l.id)
	}
	return back
}

// expiring is a min-heap of leases by the time they expire: the sweep finds
// the expired leases that hold units without looking at the others.
type expiring []expiry

type expiry struct {
	at int64 // the lease's expires when it was installed
	l  *lease
}

// watch puts l, just installed, on its shard's heap if it holds units; the
// shard is locked.
func (l *lease) watch() {
	if l.left > 0 {
		l.sh.expiring.push(expiry{l.expires, l})
	}
}

func (h *expiring) push(e expiry) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if q[parent].at <= q[i].at {
			break
		}
		q[parent], q[i] = q[i], q[parent]
		i = parent
	}
}

func (h *expiring) pop() expiry {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = expiry{}
	q = q[:n]
	for i := 0; ; {
		least, left, right := i, 2*i+1, 2*i+2
		if left < n && q[left].at < q[least].at {
			least = left
		}
		if right < n && q[right].at < q[least].at {
			least = right
		}
		if least == i {
			break
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
	*h = q
	return top
}

// closeTimeout bounds Close: the releases it makes, and the background
// calls it waits for.
const closeTimeout = 5 * time.Second

// Close is Shutdown bounded by five seconds.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown gives back every lease's unused units, then waits for the store
// calls still running in the background (renewals, releases), until ctx
// ends; later requests go to the remote store. It returns an error when a
// release failed — its units return to the limit only as its window passes
// or its bucket refills: under-admission, never over — or when ctx ended
// first. It does not close the remote store, which is closed after it.
func (s *Store) Shutdown(ctx context.Context) error {
	var all []*lease
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, l := range sh.leases {
			all = append(all, l)
		}
		sh.leases, sh.expiring = nil, nil
		sh.mu.Unlock()
	}
	now := s.now()
	var failed int
	var first error
	for _, l := range all {
		l.mu.Lock() // after a reservation in flight
		l.sh.mu.Lock()
		l.retired = true
		g, next := l.takeBack(now), l.dropNext(now)
		l.sh.mu.Unlock()
		// The newest reservation first: a refund restores a bucket fully
		// only in the reverse order of the reservations.
		for _, g := range []giveBack{next, g} {
			if err := s.giveBack(ctx, g); err != nil {
				if failed++; first == nil {
					first = err
				}
			}
		}
		l.mu.Unlock()
	}
	var err error
	if failed > 0 {
		err = fmt.Errorf("lease: %d releases of unused units failed: %w", failed, first)
	}
	return errors.Join(err, s.waitBackground(ctx))
}

// waitBackground waits until no store call runs in the background, or ctx
// ends. Such calls hold no lease Shutdown could take, and the remote store
// is closed after it.
func (s *Store) waitBackground(ctx context.Context) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.background.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease: %d store calls still running in the background: %w", s.background.Load(), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}
