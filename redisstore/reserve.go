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

// Reserve implements sluice.Reserver: one call of reserve.lua.
func (s *Store) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	script := scripts[algoCode(req.Policy.Algorithm)+reserveSuffix]
	if script == nil {
		return sluice.Reservation{}, fmt.Errorf("redisstore: Reserve %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// The same ARGV as a refund, with upTo where the refund has ref1.
	args := s.requestArgs(modeReserve, req, s.now(), true, upTo, 0)[:8]
	var reply [replyLen]int64
	if err := s.run.Run(ctx, script, []string{redisKey(s.prefix, req.Policy, req.Key)}, args, reply[:]); err != nil {
		return sluice.Reservation{}, scriptError(script, err)
	}
	granted := reply[replyAllowed]
	reply[replyAllowed] = min(granted, 1)
	res := result(req.Policy, reply[:])
	if granted == 0 {
		res.Delay = 0
	}
	return sluice.Reservation{Granted: granted, Result: res, Ref1: reply[replyRef1], Ref2: reply[replyRef2]}, nil
}

// Release implements sluice.Reserver with main.lua's refund. Like the
// cross-slot refunds, it runs under a timeout of its own even when ctx is
// done: units left reserved would deny others until they expire.
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
	script := scriptFor(req.Policy.Algorithm)
	var reply [replyLen]int64
	args := s.requestArgs(modeRefund, req, s.now(), true, r.Ref1, r.Ref2)
	if err := s.run.Run(ctx, script, []string{redisKey(s.prefix, req.Policy, req.Key)}, args, reply[:]); err != nil {
		return scriptError(script, err)
	}
	return nil
}
