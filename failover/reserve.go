package failover

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Reserver = (*Store)(nil)

// CanReserve reports whether the primary implements sluice.Reserver: Reserve
// and Release work only then. Package lease asks it before leasing.
func (s *Store) CanReserve() bool {
	_, ok := s.primary.(sluice.Reserver)
	return ok
}

// Reserve implements sluice.Reserver: one call to the primary under the
// breakers and the timeout, as Decide makes. When the primary fails, the fail
// policy decides req itself, and the Reservation says so: its Result has
// Degraded set and Granted is req.Cost if the fail policy admitted it, else
// 0. Such a reservation holds nothing in the primary to spend or give back.
// A primary that cannot reserve gets no call: sluice.ErrNotReservable.
func (s *Store) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	rs, ok := s.primary.(sluice.Reserver)
	if !ok {
		return sluice.Reservation{}, fmt.Errorf("failover: the primary store cannot reserve: %w", sluice.ErrNotReservable)
	}
	var r sluice.Reservation
	err := s.call(ctx, s.breakersOf([]sluice.Request{req}), func(cctx context.Context) (err error) {
		r, err = rs.Reserve(cctx, req, upTo)
		return err
	})
	if err == nil && s.mode == FailLocal && r.Granted == 0 {
		s.memo.note(req, r.Result, s.clock.Now())
	}
	if err == nil || !isStoreFailure(ctx, err) {
		return r, err
	}
	res, err := s.degraded(ctx, req, err)
	if err != nil {
		return sluice.Reservation{}, err
	}
	r = sluice.Reservation{Result: res}
	if res.Allowed {
		r.Granted = req.Cost
	}
	return r, nil
}

// Release implements sluice.Reserver: one call to the primary under the
// breakers and the timeout, with no fail policy — units that cannot be given
// back stay consumed, which only under-admits. A degraded reservation has
// nothing to give back.
func (s *Store) Release(ctx context.Context, req sluice.Request, r sluice.Reservation, unused int64) error {
	rs, ok := s.primary.(sluice.Reserver)
	if !ok {
		return fmt.Errorf("failover: the primary store cannot release: %w", sluice.ErrNotReservable)
	}
	if r.Result.Degraded || unused <= 0 {
		return nil
	}
	return s.call(ctx, s.breakersOf([]sluice.Request{req}), func(cctx context.Context) error {
		return rs.Release(cctx, req, r, unused)
	})
}
