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
// alone, else one call of reserve_batch shared with the reservations queued
// for the same node meanwhile (coalesce.go). A lease's background renewals of
// many keys thus share calls, as decisions do.
func (s *Store) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	if scripts[algoCode(req.Policy.Algorithm)+reserveSuffix] == nil {
		return sluice.Reservation{}, fmt.Errorf("redisstore: Reserve %s: %w", req.Policy.Algorithm, sluice.ErrNotReservable)
	}
	w := &waiter{ctx: ctx, reserve: true, upTo: upTo}
	w.one[0], w.oneKey[0] = req, s.Key(req.Policy, req.Key)
	w.reqs, w.keys = w.one[:], w.oneKey[:]
	if err := s.submit(w); err != nil {
		return sluice.Reservation{}, err
	}
	return w.res, nil
}

// runReserves makes the reservations of batch in one call, at one instant,
// in order, and sets every waiter's reservation or error.
func (s *Store) runReserves(ctx context.Context, batch []*waiter) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var script *Script
	var keys, args []string
	if w := batch[0]; len(batch) == 1 {
		script, keys = scripts[algoCode(w.reqs[0].Policy.Algorithm)+reserveSuffix], w.keys
		// The same ARGV as a refund, with upTo where the refund has ref1.
		args = s.requestArgs(modeReserve, w.reqs[0], s.now(), true, w.upTo, 0)[:8]
	} else {
		var a argBuilder
		s.batchInstant(&a)
		keys = make([]string, 0, len(batch))
		for _, w := range batch {
			a.policy(w.reqs[0].Policy)
			a.int(w.reqs[0].Cost)
			a.int(w.upTo)
			keys = append(keys, w.keys[0])
		}
		script, args = scriptReserveBatch, a.args()
	}
	reply := make([]int64, replyLen*len(batch))
	err := s.run.Run(ctx, script, keys, args, reply)
	for i, w := range batch {
		if err != nil {
			w.err = scriptError(script, err)
			continue
		}
		w.res = reservation(w.reqs[0].Policy, reply[i*replyLen:(i+1)*replyLen])
	}
	s.finish(batch, batch)
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
	if err := s.run.Run(ctx, script, []string{s.Key(req.Policy, req.Key)}, args, reply[:]); err != nil {
		return scriptError(script, err)
	}
	return nil
}
