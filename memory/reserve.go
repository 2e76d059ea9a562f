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
	o := op{kind: opReserve, req: req, upTo: upTo}
	var res sluice.Result
	if !s.apply(req.Policy, req.Key, req.Cost, true, &o, &res) { // no room for the key: nothing reserved
		return sluice.Reservation{Result: res}, nil
	}
	return o.r, nil
}

// Release implements sluice.Reserver.
func (s *Store) Release(_ context.Context, req sluice.Request, r sluice.Reservation, unused int64) error {
	if !sluice.Reservable(req.Policy.Algorithm) {
		return fmt.Errorf("memory: Release %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	var res sluice.Result
	s.apply(req.Policy, req.Key, 0, false, &op{kind: opRelease, req: req, r: r, unused: unused}, &res)
	return nil
}
