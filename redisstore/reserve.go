package redisstore

import (
	"context"
	_ "embed" // reserve.lua
	"fmt"

	"github.com/sluicehq/sluice"
)

//go:embed lua/reserve.lua
var luaReserve string

// modeReserve marks reserve.lua's argv (it has one mode only).
const modeReserve = "v"

// reserveSuffix marks the entry points reserving units (reserve.lua), one
// per algorithm sluice.Reservable accepts.
const reserveSuffix = "_reserve"

var _ sluice.Reserver = (*Store)(nil)

// Reserve implements sluice.Reserver: one call of reserve.lua when it is
// alone, else one call of decide_batch shared with the decisions,
// reservations and releases queued for the same node meanwhile
// (coalesce.go). A lease's background renewals of many keys thus share calls
// with each other and with the decisions of keys too cold to lease.
func (s *Store) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	if scripts[algoCode(req.Policy.Algorithm)+reserveSuffix] == nil {
		return sluice.Reservation{}, fmt.Errorf("redisstore: Reserve %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	w := &waiter{ctx: ctx, op: opReserve, upTo: upTo}
	w.setOne(req, s.Key(req.Policy, req.Key))
	if err := s.submit(w); err != nil {
		return sluice.Reservation{}, err
	}
	return w.res, nil
}

// reservation reads one reservation's reply.
func reservation(p *sluice.Policy, reply []int64) sluice.Reservation {
	granted := reply[replyAllowed]
	reply[replyAllowed] = min(granted, 1)
	res := result(p, reply)
	if granted == 0 {
		res.Delay = 0
	}
	return sluice.Reservation{Granted: granted, Result: res, Ref1: reply[replyRef1], Ref2: reply[replyRef2]}
}

// Release implements sluice.Reserver with main.lua's refund, alone or in a
// batch with what is queued for the node (coalesce.go). Like the cross-slot
// refunds, it runs under a timeout of its own even when ctx is done: units
// left reserved would deny others until they expire.
func (s *Store) Release(ctx context.Context, req sluice.Request, r sluice.Reservation, unused int64) error {
	if !sluice.Reservable(req.Policy.Algorithm) {
		return fmt.Errorf("redisstore: Release %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	if unused <= 0 {
		return nil
	}
	timeout := s.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	req.Cost = unused
	w := &waiter{ctx: ctx, op: opRelease, res: r}
	w.setOne(req, s.Key(req.Policy, req.Key))
	return s.submit(w)
}
