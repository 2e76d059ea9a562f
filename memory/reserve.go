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
	res, applied := s.apply(req.Policy, req.Key, true, func(st sluice.State, now int64) (sluice.State, sluice.Result) {
		var next sluice.State
		next, r = sluice.Reserve(req.Policy, st, now, req.Cost, upTo)
		return next, r.Result
	})
	if !applied { // no room for the key: nothing reserved
		return sluice.Reservation{Result: res}, nil
	}
	return r, nil
}

// Release implements sluice.Reserver.
func (s *Store) Release(_ context.Context, req sluice.Request, r sluice.Reservation, unused int64) error {
	if !sluice.Reservable(req.Policy.Algorithm) {
		return fmt.Errorf("memory: Release %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	s.apply(req.Policy, req.Key, false, func(st sluice.State, now int64) (sluice.State, sluice.Result) {
		next := sluice.Refund(req.Policy, st, now, r, unused)
		_, peek := sluice.Decide(req.Policy, next, now, 0) // for the new expiry
		return next, peek
	})
	return nil
}
