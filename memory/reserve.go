package memory

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Reserver = (*Store)(nil)

// Reserve implements sluice.Reserver: between req.Cost and upTo units at one
// instant, under the key's shard lock.
func (s *Store) Reserve(_ context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	if !sluice.Reservable(req.Policy.Algorithm) {
		return sluice.Reservation{}, fmt.Errorf("memory: Reserve %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	var r sluice.Reservation
	s.update(req, func(st sluice.State, now int64) (sluice.State, sluice.Result) {
		var next sluice.State
		next, r = sluice.Reserve(req.Policy, st, now, req.Cost, upTo)
		return next, r.Result
	})
	return r, nil
}

// Release implements sluice.Reserver.
func (s *Store) Release(_ context.Context, req sluice.Request, r sluice.Reservation, unused int64) error {
	if !sluice.Reservable(req.Policy.Algorithm) {
		return fmt.Errorf("memory: Release %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	s.update(req, func(st sluice.State, now int64) (sluice.State, sluice.Result) {
		next := sluice.Refund(req.Policy, st, now, r, unused)
		_, peek := sluice.Decide(req.Policy, next, now, 0) // for the new expiry
		return next, peek
	})
	return nil
}

// update replaces the state of (req.Policy, req.Key) with what f makes of it,
// under the shard lock; f's Result gives the new state's expiry.
func (s *Store) update(req sluice.Request, f func(sluice.State, int64) (sluice.State, sluice.Result)) {
	now := s.now()
	id := idOf(req.Policy, req.Key)
	h := s.hash(id)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, found := sh.find(h, id)
	var st sluice.State
	if found {
		st = sh.entries[i].state
	}
	next, res := f(st, now)
	sh.put(h, id, found, i, next, now, res, s.perShard)
}
