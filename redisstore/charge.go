package redisstore

import (
	"context"
	_ "embed" // the charges' Lua

	"github.com/sluicehq/sluice"
)

// The charges' Lua: charge.lua holds their helpers and entry points, and
// comes before each algorithm's charge function.
var (
	//go:embed lua/charge.lua
	luaCharge string
	//go:embed lua/charge_fixed_window.lua
	luaChargeFixedWindow string
	//go:embed lua/charge_sliding_window.lua
	luaChargeSlidingWindow string
	//go:embed lua/charge_sliding_log.lua
	luaChargeSlidingLog string
	//go:embed lua/charge_token_bucket.lua
	luaChargeTokenBucket string
	//go:embed lua/charge_gcra.lua
	luaChargeGCRA string
	//go:embed lua/charge_leaky_bucket.lua
	luaChargeLeakyBucket string
)

// chargeSuffix marks the entry points charging one algorithm (charge_one).
const chargeSuffix = "_charge"

// modeCharge marks charge_one's argv, laid out as decide_one's.
const modeCharge = "c"

// chargeFiles is the Lua the library adds for charges: the helpers, then
// every algorithm's charge (GCRA's before the leaky bucket's, which is it).
func chargeFiles() []string {
	return []string{luaCharge, luaChargeFixedWindow, luaChargeSlidingWindow, luaChargeSlidingLog,
		luaChargeTokenBucket, luaChargeGCRA, luaChargeLeakyBucket}
}

// chargeEntries are the charges' scripts: one per algorithm, made of the
// algorithm's files and its charge, and one charging any mix of them.
func chargeEntries() []entry {
	var es []entry
	for _, a := range sluice.Algorithms {
		files := []string{luaHeader, algoFile(a), luaCharge, chargeFile(a)}
		if a == sluice.LeakyBucket {
			files = []string{luaHeader, luaGCRA, luaLeakyBucket, luaCharge, luaChargeGCRA, luaChargeLeakyBucket}
		}
		es = append(es, entry{name: string(a) + chargeSuffix, code: algoCode(a) + chargeSuffix, files: files})
	}
	every := []string{luaHeader, luaFixedWindow, luaSlidingWindow, luaSlidingLog, luaTokenBucket, luaGCRA, luaLeakyBucket}
	return append(es, entry{name: "charge_batch", code: "charge_batch", files: append(every, chargeFiles()...)})
}

func chargeFile(a sluice.Algorithm) string {
	switch a {
	case sluice.FixedWindow:
		return luaChargeFixedWindow
	case sluice.SlidingWindow:
		return luaChargeSlidingWindow
	case sluice.SlidingLog:
		return luaChargeSlidingLog
	case sluice.TokenBucket:
		return luaChargeTokenBucket
	default:
		return luaChargeGCRA
	}
}

var _ sluice.Charger = (*Store)(nil)

// Charge implements sluice.Charger: one call of its algorithm's charge when
// it is alone, else one call of charge_batch shared with the charges queued
// for the same node meanwhile (coalesce.go), as decisions share theirs.
func (s *Store) Charge(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	w := s.oneWaiter(ctx, req)
	w.op = opCharge
	if err := s.submit(w); err != nil {
		return sluice.Result{}, err
	}
	return w.oneRes[0], nil
}

// ChargeAll implements sluice.Charger. Charges on one node (a single Redis,
// one Cluster slot, one shard) go in one call of charge_batch, shared with
// the charges queued meanwhile; charges spread over several go to each node
// at once, pipelined. An error may leave some of them recorded, never twice.
func (s *Store) ChargeAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	if len(reqs) == 0 {
		return nil
	}
	keys := s.keysOf(reqs)
	if !s.run.Colocated(keys) {
		return s.chargeSpread(ctx, reqs, keys, results)
	}
	w := &waiter{ctx: ctx, reqs: reqs, keys: keys, all: true, op: opCharge}
	if err := s.submit(w); err != nil {
		return err
	}
	copy(results, w.results)
	return nil
}

// runCharges makes the charges of batch in one call, at one instant, in
// order, and sets every waiter's results or error.
func (s *Store) runCharges(ctx context.Context, batch []*waiter) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var script *Script
	var keys, args []string
	n := 0
	for _, w := range batch {
		n += len(w.reqs)
	}
	if w := batch[0]; n == 1 {
		script, keys = scripts[algoCode(w.reqs[0].Policy.Algorithm)+chargeSuffix], w.keys
		args = s.requestArgs(modeCharge, w.reqs[0], s.now(), false, 0, 0)
	} else {
		var a argBuilder
		s.batchInstant(&a)
		keys = make([]string, 0, n)
		for _, w := range batch {
			for i, r := range w.reqs {
				a.policy(r.Policy)
				a.int(r.Cost)
				keys = append(keys, w.keys[i])
			}
		}
		script, args = scriptChargeBatch, a.args()
	}
	reply := make([]int64, batchStride*n)
	setResults(batch, script, reply, s.run.Run(ctx, script, keys, args, reply))
	s.finish(batch, batch)
}

// chargeSpread charges requests whose keys live on several nodes: each its
// own call of charge_one, sent together (one pipelined round trip per node).
func (s *Store) chargeSpread(ctx context.Context, reqs []sluice.Request, keys []string, results []sluice.Result) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.now() // one instant for the whole set, with a client clock
	replies := make([]int64, len(reqs)*batchStride)
	calls := make([]Call, len(reqs))
	for i, r := range reqs {
		calls[i] = Call{
			Script: scripts[algoCode(r.Policy.Algorithm)+chargeSuffix],
			Keys:   keys[i : i+1 : i+1],
			Args:   s.requestArgs(modeCharge, r, now, false, 0, 0),
			Reply:  replies[i*batchStride : (i+1)*batchStride],
		}
	}
	s.run.RunMulti(ctx, calls)
	for i, c := range calls {
		if c.Err != nil {
			return scriptError(c.Script, s.blame(keys[i], c.Err))
		}
		results[i] = result(reqs[i].Policy, c.Reply)
	}
	return nil
}
