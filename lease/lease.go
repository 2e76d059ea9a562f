package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Store is a sluice.Store deciding locally from leased quota. It is safe for
// concurrent use. Create it with New; call Close to give back unused quota.
type Store struct {
	remote     sluice.Store
	reserver   sluice.Reserver // nil: the remote cannot reserve, every request goes to it
	clock      sluice.Clock
	ttl        time.Duration
	maxLease   int64
	off        bool // WithOff: policies lease only when SetPolicies says so
	sweepEvery time.Duration
	policies   atomic.Pointer[map[string]Settings]

	mu        sync.Mutex
	leases    map[leaseID]*lease
	nextSweep int64
	closed    bool

	decisions  atomic.Int64
	storeCalls atomic.Int64
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
	s := &Store{remote: remote, clock: sluice.SystemClock(), sweepEvery: 10 * time.Millisecond, leases: make(map[leaseID]*lease)}
	s.reserver, _ = remote.(sluice.Reserver)
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

// Stats counts the store's work since New, and what it holds now.
type Stats struct {
	Decisions  int64 // requests decided (Decide and DecideAll)
	StoreCalls int64 // calls to the remote store (reservations, releases, decisions)
	Leases     int   // leases held, live or expired but not yet given back
	Held       int64 // units held unused in live leases: what this node can admit without the store
}

// Stats returns the counters, and counts what the leases hold.
func (s *Store) Stats() Stats {
	st := Stats{Decisions: s.decisions.Load(), StoreCalls: s.storeCalls.Load()}
	s.mu.Lock()
	leases := make([]*lease, 0, len(s.leases))
	for _, l := range s.leases {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	st.Leases = len(leases)
	now := s.now()
	for _, l := range leases {
		l.mu.Lock()
		if now < l.expires && !l.retired {
			st.Held += l.left
		}
		l.mu.Unlock()
	}
	return st
}

// Decide implements sluice.Store: from the key's lease when it holds the
// cost, else after reserving a new one.
func (s *Store) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	s.decisions.Add(1)
	if req.Cost == 0 || s.ttlOf(req.Policy) == 0 {
		return s.remoteDecide(ctx, req)
	}
	now := s.now()
	s.sweepDue(ctx, now)
	for {
		l, ok := s.lease(req)
		if !ok { // closed
			return s.remoteDecide(ctx, req)
		}
		l.mu.Lock()
		if l.retired { // swept away while we waited: take the new one
			l.mu.Unlock()
			continue
		}
		res, err := s.decideOn(ctx, l, req, now)
		l.mu.Unlock()
		return res, err
	}
}

func (s *Store) remoteDecide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	s.storeCalls.Add(1)
	return s.remote.Decide(ctx, req)
}

// decideOn decides req on l, which the caller holds locked.
func (s *Store) decideOn(ctx context.Context, l *lease, req sluice.Request, now int64) (sluice.Result, error) {
	if *req.Policy != l.policy {
		// A reloaded policy (same name and algorithm): what the lease holds
		// was decided under the old one. Give its units back and forget its
		// denial, so a lowered limit denies and a raised one admits at once.
		s.release(ctx, l, now)
		l.deniedUntil = 0
	}
	if l.left >= req.Cost && now < l.expires {
		l.left -= req.Cost
		return l.admitted(now), nil
	}
	if now < l.deniedUntil && req.Cost >= l.deniedCost {
		return l.denied(now), nil
	}
	ttl := s.ttlOf(req.Policy)
	size := l.nextSize(req.Cost, now, s.maxLeaseOf(req.Policy), ttl)
	s.release(ctx, l, now)
	l.policy = *req.Policy
	s.storeCalls.Add(1)
	r, err := s.reserver.Reserve(ctx, req, size)
	if err != nil {
		return sluice.Result{}, err
	}
	if r.Result.Degraded {
		// The store failed and a fail policy decided this request alone:
		// there is no lease to install, nor a store's denial to remember.
		return r.Result, nil
	}
	if r.Granted == 0 {
		l.deny(r, req.Cost, max(size, l.size), now, ttl)
		return l.denied(now), nil
	}
	l.install(r, size, now, ttl)
	l.left -= req.Cost
	return l.admitted(now), nil
}

// release gives back l's unused units, if any; l is locked. A failed release
// leaves them consumed until the state expires: under-admission only.
func (s *Store) release(ctx context.Context, l *lease, now int64) {
	unused := l.left
	l.left = 0
	if unused <= 0 || l.policy.Algorithm == sluice.FixedWindow && now >= l.windowEnd {
		return // nothing to give back, or its window is over
	}
	s.storeCalls.Add(1)
	_ = s.reserver.Release(ctx, sluice.Request{Policy: &l.policy, Key: l.key, Cost: unused}, l.res, unused)
}

// lease returns the lease of req's (policy, key), creating it; false once
// the store is closed.
func (s *Store) lease(req sluice.Request) (*lease, bool) {
	id := leaseID{policy: req.Policy.Name, alg: req.Policy.Algorithm, key: req.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	l := s.leases[id]
	if l == nil {
		l = &lease{id: id, policy: *req.Policy, key: req.Key, size: 1}
		s.leases[id] = l
	}
	return l, true
}

// sweepDue gives back the expired leases of idle keys, at most once per
// sweepEvery, and forgets leases idle for longer than their TTL.
func (s *Store) sweepDue(ctx context.Context, now int64) {
	s.mu.Lock()
	if now < s.nextSweep || s.closed {
		s.mu.Unlock()
		return
	}
	s.nextSweep = now + s.sweepEvery.Microseconds()
	var idle []*lease
	for id, l := range s.leases {
		if !l.mu.TryLock() {
			continue // in use: not idle
		}
		if now >= l.expires && now >= l.deniedUntil {
			l.retired = true
			delete(s.leases, id)
			idle = append(idle, l)
		} else {
			l.mu.Unlock()
		}
	}
	s.mu.Unlock()
	for _, l := range idle {
		s.release(ctx, l, now)
		l.mu.Unlock()
	}
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
	s.decisions.Add(int64(len(reqs)))
	s.storeCalls.Add(1)
	return s.remote.DecideAll(ctx, reqs, results)
}

// Close gives back every lease's unused units; later requests go to the
// remote store. It does not close the remote store.
func (s *Store) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	leases := s.leases
	s.leases = nil
	s.mu.Unlock()
	now := s.now()
	for _, l := range leases {
		l.mu.Lock()
		l.retired = true
		s.release(ctx, l, now)
		l.mu.Unlock()
	}
}

func (s *Store) now() int64 { return s.clock.Now().UnixMicro() }
