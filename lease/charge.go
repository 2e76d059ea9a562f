package lease

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Charger = (*Store)(nil)

// Charge implements sluice.Charger. The units the key's live lease holds
// were counted by the remote store when they were reserved, so a charge
// spends them first, as decisions do, and charges only the rest to the
// remote store, which records it even beyond the limit. A charge the lease
// covers makes no store call and answers as a decision from the lease does.
//
// Charges leave the bound (Store.Bound) as it is: the units they take from a
// lease are spent like any admission from it, within its TTL of the
// reservation, and the rest is counted in the remote store at once. A key
// charged into debt gets no new lease until time has repaid it, since the
// store denies the reservations. Charges of policies that are not leased go
// to the remote store as they are.
func (s *Store) Charge(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	c, err := s.remoteCharger()
	if err != nil {
		return sluice.Result{}, err
	}
	if res, ok := s.chargeLocal(&req); ok {
		return res, nil
	}
	s.storeCalls.Add(1)
	return c.Charge(ctx, req)
}

// ChargeAll implements sluice.Charger: each charge takes what its key's
// lease holds, in order, and the rest go to the remote store in one
// ChargeAll.
func (s *Store) ChargeAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	c, err := s.remoteCharger()
	if err != nil {
		return err
	}
	var rest []sluice.Request
	var at []int
	for i := range reqs {
		r := reqs[i]
		if res, ok := s.chargeLocal(&r); ok {
			results[i] = res
			continue
		}
		rest, at = append(rest, r), append(at, i)
	}
	if len(rest) == 0 {
		return nil
	}
	remote := make([]sluice.Result, len(rest))
	s.storeCalls.Add(1)
	if err := c.ChargeAll(ctx, rest, remote); err != nil {
		return err
	}
	for j, i := range at {
		results[i] = remote[j]
	}
	return nil
}

func (s *Store) remoteCharger() (sluice.Charger, error) {
	c, ok := s.remote.(sluice.Charger)
	if !ok {
		return nil, fmt.Errorf("lease: the remote store cannot charge: %w", sluice.ErrNotChargeable)
	}
	return c, nil
}

// chargeLocal takes what it can of req's cost from its key's live lease,
// leaving the rest in req.Cost; it returns the Result when the lease paid
// for all of it.
func (s *Store) chargeLocal(req *sluice.Request) (sluice.Result, bool) {
	if req.Cost == 0 || s.ttlOf(req.Policy) == 0 {
		return sluice.Result{}, false
	}
	now := s.now()
	sh := s.shardOf(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.leases[leaseID{policy: req.Policy.Name, alg: req.Policy.Algorithm, key: req.Key}] // nil once closed
	if l == nil || l.retired || *req.Policy != l.policy || now >= l.expires || l.left == 0 {
		return sluice.Result{}, false
	}
	took := min(l.left, req.Cost)
	l.left -= took
	req.Cost -= took
	if req.Cost > 0 {
		return sluice.Result{}, false
	}
	return l.admitted(now), true
}

// peek answers a peek at the key from its lease (shard locked) when the
// lease holds a unit, current or reserved ahead: a request of one unit
// would be admitted here without the store, which counts those units as
// consumed and would deny it. Otherwise the store answers.
func (l *lease) peek(p *sluice.Policy, now int64) (sluice.Result, bool) {
	held := l.held(now)
	if *p != l.policy || held < 1 {
		return sluice.Result{}, false
	}
	left, _ := l.globalLeft(now)
	res := l.admitted(now)
	res.Remaining = min(l.policy.Capacity(), held+left)
	return res, true
}

// peekLocal answers a peek (cost 0) at a leased policy from the key's lease
// when it holds a unit (see lease.peek).
func (s *Store) peekLocal(req sluice.Request) (sluice.Result, bool) {
	if req.Cost != 0 || s.ttlOf(req.Policy) == 0 {
		return sluice.Result{}, false
	}
	sh := s.shardOf(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.leases[leaseID{policy: req.Policy.Name, alg: req.Policy.Algorithm, key: req.Key}] // nil once closed
	if l == nil || l.retired {
		return sluice.Result{}, false
	}
	res, ok := l.peek(req.Policy, s.now())
	if ok {
		sh.decisions++
	}
	return res, ok
}
