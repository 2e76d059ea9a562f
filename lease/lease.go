package lease

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
)

// Store is a sluice.Store deciding locally from leased quota. It is safe for
// concurrent use. Create it with New; call Close (or Shutdown) to give back
// unused quota.
type Store struct {
	remote     sluice.Store
	reserver   sluice.Reserver // nil: the remote cannot reserve, every request goes to it
	clock      sluice.Clock
	ttl        time.Duration
	maxLease   int64
	off        bool // WithOff: policies lease only when SetPolicies says so
	sweepEvery time.Duration
	policies   atomic.Pointer[map[string]Settings]

	seed      maphash.Seed
	shards    [numShards]shard
	nextSweep atomic.Int64
	sweeps    atomic.Int64

	remoteDecisions atomic.Int64 // decided on the remote store; the shards count the rest
	storeCalls      atomic.Int64
	releases        atomic.Int64
	renewals        atomic.Int64  // reservations made ahead, in the background
	background      atomic.Int64  // store calls in flight in the background
	waited          atomic.Int64  // decisions that waited for the store
	reserveMicros   atomic.Int64  // a moving average of a reservation's latency
	budget          time.Duration // how long a decision may wait for the remote (failover); 0: no bound
}

var _ sluice.Store = (*Store)(nil)

type leaseID struct {
	policy string
	alg    sluice.Algorithm
	key    string
}

// New returns a Store leasing quota from remote. A remote that does not
// implement sluice.Reserver gets every request, as if there were no leases.
func New(remote sluice.Store, opts ...Option) *Store {
	s := &Store{remote: remote, clock: sluice.SystemClock(), sweepEvery: 10 * time.Millisecond, seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].leases = make(map[leaseID]*lease)
	}
	s.reserver, _ = remote.(sluice.Reserver)
	if b, ok := remote.(interface{ Budget() time.Duration }); ok {
		s.budget = b.Budget()
	}
	if c, ok := remote.(interface{ CanReserve() bool }); ok && !c.CanReserve() {
		s.reserver = nil // a wrapper (failover) around a store that cannot reserve
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Remote returns the store the leases are taken from.
func (s *Store) Remote() sluice.Store { return s.remote }

// Decide implements sluice.Store: from the key's lease when it holds the
// cost (one short critical section, no allocation); for a key that asks too
// rarely for a lease to pay (fewer than leaseMin requests per TTL), with one
// call to the store, as without leases, after one lookup in its shard; else
// after reserving a new lease.
func (s *Store) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	ttl := s.ttlOf(req.Policy)
	if req.Cost == 0 || ttl == 0 {
		if res, ok := s.peekLocal(req); ok {
			return res, nil
		}
		s.remoteDecisions.Add(1)
		s.waited.Add(1)
		return s.remoteDecide(ctx, req)
	}
	now := s.now()
	s.sweepDue(ctx, now)
	sh, h := s.shardHash(req.Key)
	tag := s.coldTag(h, req.Policy.Name)
	id := leaseID{policy: req.Policy.Name, alg: req.Policy.Algorithm, key: req.Key}
	sh.mu.Lock()
	if sh.leases == nil { // closed
		sh.mu.Unlock()
		s.remoteDecisions.Add(1)
		return s.remoteDecide(ctx, req)
	}
	sh.decisions++
	d := ttl.Microseconds()
	// A key with a slot in the cold table has no lease: one lookup decides
	// a cold key's way.
	m := sh.cold.lookup(tag)
	var l *lease
	if m == nil {
		if l = sh.leases[id]; l == nil {
			m = sh.cold.insert(tag, now)
		}
	}
	if l == nil {
		m.add(req.Cost, now, d)
		if !m.warm(now) {
			// Too cold to lease: one call decides, as without leases. The
			// shard counts it (Stats), so that no counter shared by every
			// caller is written on this path.
			sh.direct++
			sh.mu.Unlock()
			return s.remote.Decide(ctx, req)
		}
		dm := *m // get frees the slot
		l = sh.get(id, req.Policy, tag)
		l.demand = dm
	} else {
		l.demand.add(req.Cost, now, d)
	}
	res, ok := l.local(req, now)
	var back giveBack
	if !ok {
		if back, ok = l.takeOver(req.Policy, now); ok {
			back = l.worth(back, now)
			res, ok = l.local(req, now)
		}
	}
	if ok {
		l.saved++
		// A renewal is a call made ahead: the calls the lease saved pay
		// for it, as for a release.
		renew := res.Allowed && l.saved >= 1 && l.demand.warm(now) && l.wantsRenewal(now, s.renewLead())
		if renew {
			l.saved--
		}
		sh.mu.Unlock()
		s.giveBackLater(ctx, back)
		if renew {
			s.startRenewal(ctx, l)
		}
		return res, nil
	}
	if l.next == nil && *req.Policy == l.policy && !l.demand.warm(now) {
		// A cold key: one call decides, and nothing is reserved. What an
		// earlier lease has left goes back if that pays.
		back = l.worth(l.takeBack(now), now)
		sh.direct++
		sh.mu.Unlock()
		s.giveBackLater(ctx, back)
		return s.remote.Decide(ctx, req)
	}
	sh.mu.Unlock()
	// From here the decision waits for the store: its releases, its key's
	// reservation in flight and its own share one time budget
	// (failover.MarkStart), so that behind a stalled store a fail-over
	// Store's maximum timeout bounds the whole decision, not each call.
	start := time.Now()
	ctx = failover.MarkStart(ctx, start)
	s.giveBack(ctx, back)
	s.waited.Add(1)
	return s.reserve(ctx, sh, id, tag, req, s.waitUntil(start))
}

// waitUntil is when a decision marked at start stops waiting for its key's
// reservation in flight (zero: it waits for it): the end of the remote
// store's time budget (failover.Store.Budget).
func (s *Store) waitUntil(start time.Time) time.Time {
	if s.budget <= 0 {
		return time.Time{}
	}
	return start.Add(s.budget)
}

func (s *Store) remoteDecide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	s.storeCalls.Add(1)
	return s.remote.Decide(ctx, req)
}

// reserve decides req, which its key's lease could not, with a new
// reservation. One caller per key reserves at a time (the lease's mu); the
// others wait for it, until waitUntil, and then decide from what it got. One
// that waited too long asks the remote store, whose fail policy decides at
// once (its budget is spent).
func (s *Store) reserve(ctx context.Context, sh *shard, id leaseID, tag uint64, req sluice.Request, waitUntil time.Time) (sluice.Result, error) {
	for {
		sh.mu.Lock()
		if sh.leases == nil { // closed
			sh.mu.Unlock()
			return s.remoteDecide(ctx, req)
		}
		l := sh.get(id, req.Policy, tag)
		sh.mu.Unlock()
		if !l.mu.LockBefore(waitUntil) {
			return s.remoteDecide(ctx, req)
		}
		now := s.now() // after waiting for another caller's reservation
		sh.mu.Lock()
		if l.retired { // swept away or closed while we waited: take the new one
			sh.mu.Unlock()
			l.mu.Unlock()
			continue
		}
		if res, ok := l.local(req, now); ok { // another caller reserved meanwhile
			l.saved++
			sh.mu.Unlock()
			l.mu.Unlock()
			return res, nil
		}
		changed := *req.Policy != l.policy
		if changed {
			// A reloaded policy (same name and algorithm): what the lease
			// holds was decided under the old one. Give its units back and
			// forget its denial, so a lowered limit denies and a raised one
			// admits at once.
			l.deniedUntil = 0
		}
		ttl := s.ttlOf(req.Policy)
		size := l.nextSize(req.Cost, now, s.maxLeaseOf(req.Policy), ttl)
		back := l.takeBack(now)
		var dropped giveBack
		if !changed {
			back = l.worth(back, now)
			// A renewal waiting behind a lease that still had units (or
			// that expired unused) takes over, or is given back.
			var promoted bool
			promoted, dropped = l.promote(now)
			if promoted {
				if res, ok := l.local(req, now); ok {
					l.saved++
					sh.mu.Unlock()
					l.mu.Unlock()
					s.giveBack(ctx, back)
					return res, nil
				}
				dropped = l.takeBack(now) // it cannot pay the cost
			}
			dropped = l.worth(dropped, now)
		}
		if g := l.dropNext(now); g.unused > 0 { // reserved under an older policy
			dropped = g
		}
		l.policy = *req.Policy
		sh.mu.Unlock()

		s.giveBack(ctx, dropped) // the newer reservation first
		s.giveBack(ctx, back)
		r, err := s.timedReserve(ctx, req, size, now)

		sh.mu.Lock()
		// A lease installed here is not renewed at once even when the request
		// spent it whole: its next decisions renew it, if the key stays warm.
		res, err := l.settle(r, err, req.Cost, size, now, ttl)
		sh.mu.Unlock()
		l.mu.Unlock()
		return res, err
	}
}

// giveBack returns what a lease did not use to the store. A failed release
// leaves the units consumed until the state expires: under-admission only.
func (s *Store) giveBack(ctx context.Context, g giveBack) error {
	if g.unused <= 0 {
		return nil
	}
	s.storeCalls.Add(1)
	s.releases.Add(1)
	return s.reserver.Release(ctx, sluice.Request{Policy: &g.policy, Key: g.key, Cost: g.unused}, g.res, g.unused)
}

// DecideAll implements sluice.Store. A single request is decided as Decide
// does; a batch goes to the remote store, which counts every leased unit as
// consumed, so all-or-nothing holds exactly and no limit is exceeded.
func (s *Store) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	if len(reqs) == 1 {
		res, err := s.Decide(ctx, reqs[0])
		results[0] = res
		return err
	}
	s.remoteDecisions.Add(int64(len(reqs)))
	s.storeCalls.Add(1)
	return s.remote.DecideAll(ctx, reqs, results)
}

func (s *Store) now() int64 { return s.clock.Now().UnixMicro() }
