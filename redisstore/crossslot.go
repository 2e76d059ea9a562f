package redisstore

import (
	"context"
	"slices"
	"sync"

	"github.com/sluicehq/sluice"
)

// decideSpread decides an all-or-nothing set whose keys live in several
// Cluster slots, where no single script can see them all:
//
//  1. Dry run: decide every request without writing anything, each in the
//     queue of its key's node (coalesce.go) as a lone Decide is, so that
//     under load it rides in the call that node makes anyway; the requests
//     of idle nodes go at once, one call per node, the nodes at the same
//     time. If any denies, the set is denied with the largest RetryAfter and
//     nothing has been written — the common case under load, at no call of
//     its own. (A set of more than maxBatch keys makes its dry run apart, a
//     call per key, pipelined: see dryRunApart.)
//  2. Reserve: admit the requests one at a time, in key order, each as a lone
//     Decide in the queue of its key's node (coalesce.go), so that under load
//     it shares a call with what is queued there. If one is denied after all
//     (another client got there since the dry run), refund the reservations
//     made so far (releases in the same queues) and deny the set.
//
// With a client clock each dry run and reservation is decided at its call's
// instant.
//
// The key order makes two sets that share keys contend on their first shared
// key before either holds anything else, instead of each reserving a part
// and failing on the other's. A refund undoes the reserved cost — exactly for
// the windows and the log; a bucket keeps back whatever refill the units may
// have absorbed since (see gcra.lua, token_bucket.lua) — so the race can make
// a set deny that a single script would have admitted, but never admits more
// than the limits allow. Between a reservation and its refund the units count
// against the limit, so a concurrent request may be denied meanwhile; if a
// refund cannot reach Redis, its units stay consumed until the key expires.
func (s *Store) decideSpread(ctx context.Context, reqs []sluice.Request, keys []string, results []sluice.Result) error {
	n := len(reqs)
	replies := make([]int64, 2*n*replyLen)
	dry, held := replies[:n*replyLen], replies[n*replyLen:]
	if err := s.dryRun(ctx, reqs, keys, dry); err != nil {
		return err
	}
	denied, wait := false, int64(0)
	for i := range reqs {
		if r := dry[i*replyLen:]; r[replyAllowed] == 0 {
			denied, wait = true, max(wait, r[replyRetry])
		}
	}
	if denied {
		deny(reqs, dry, wait, results)
		return nil
	}

	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if keys[a] < keys[b] {
			return -1
		}
		return 1 // keys are distinct
	})
	for k, i := range order {
		reply := held[i*replyLen : (i+1)*replyLen]
		err := s.hold(ctx, reqs[i], keys[i], reply)
		if err != nil {
			// This reservation may or may not have been applied; if it was,
			// its units stay consumed until they expire (never over-admits).
			s.refund(ctx, reqs, keys, held, order[:k])
			return scriptError(scriptFor(reqs[i].Policy.Algorithm), s.blame(keys[i], err))
		}
		if reply[replyAllowed] == 0 {
			s.refund(ctx, reqs, keys, held, order[:k])
			deny(reqs, dry, reply[replyRetry], results)
			// The denying key's own view is fresher than its dry run's.
			results[i].Remaining = reply[replyRemaining]
			results[i].ResetAfter = result(reqs[i].Policy, reply).ResetAfter
			return nil
		}
	}
	for i, r := range reqs {
		results[i] = result(r.Policy, held[i*replyLen:])
	}
	return nil
}

// dryRun decides the requests of a spread set without writing anything,
// request i's reply to dry[i*replyLen:], each in the queue of its key's node
// (coalesce.go): where a call is in flight, it waits behind it with what is
// queued there and goes in the next call (a 'd' record of decide_batch);
// elsewhere it goes at once, with the set's other requests for that node, in
// one call (alone: main.lua's mode 'd'), the nodes' calls at the same time.
// Every queue is joined before any call is made, so that one node's call
// does not hold back the set's requests for another.
func (s *Store) dryRun(ctx context.Context, reqs []sluice.Request, keys []string, dry []int64) error {
	if len(reqs) > maxBatch {
		return s.dryRunApart(ctx, reqs, keys, dry)
	}
	ws := make([]waiter, len(reqs))
	var qks []queueKey
	var groups [][]*waiter // the waiters of each of qks
	for i := range ws {
		w := &ws[i]
		w.setDry(ctx, reqs[i], keys[i], dry[i*replyLen:(i+1)*replyLen])
		qk, _ := s.queueOf(w.keys) // a lone key always has a queue
		g := slices.Index(qks, qk)
		if g < 0 {
			g = len(qks)
			qks, groups = append(qks, qk), append(groups, nil)
		}
		groups[g] = append(groups[g], w)
	}
	q := s.queuesOf(&ws[0])
	var idle []int // the groups whose call this set makes
	for g := range groups {
		if q.join(qks[g], groups[g]...) {
			idle = append(idle, g)
		}
	}
	var wg sync.WaitGroup
	for k, g := range idle {
		call := func() {
			s.runBatch(ctx, groups[g])
			s.handOff(q, qks[g])
		}
		if k == len(idle)-1 {
			call() // the last on this goroutine
		} else {
			wg.Go(call)
		}
	}
	wg.Wait()
	for i := range ws {
		if err := ws[i].wait(); err != nil {
			return scriptError(scriptFor(reqs[i].Policy.Algorithm), s.blame(keys[i], err))
		}
	}
	return nil
}

// setDry makes w the dry run of req on key, replying to reply.
func (w *waiter) setDry(ctx context.Context, req sluice.Request, key string, reply []int64) {
	w.ctx, w.op, w.held = ctx, opDry, reply
	w.setOne(req, key)
}

// dryRunApart is dryRun for a set of more than maxBatch keys: each request
// in main.lua's mode 'd', the calls pipelined (one round trip per node) and
// none shared with the queues. Such a set would otherwise take a goroutine
// for each of its many partitions (a Cluster's slots), and fill its nodes'
// next calls on its own.
func (s *Store) dryRunApart(ctx context.Context, reqs []sluice.Request, keys []string, dry []int64) error {
	now := s.now() // one instant for the whole set, with a client clock
	calls := make([]Call, len(reqs))
	for i, r := range reqs {
		calls[i] = Call{
			Script: scriptFor(r.Policy.Algorithm),
			Keys:   keys[i : i+1 : i+1],
			Args:   s.requestArgs(modeDry, r, now, false, 0, 0),
			Reply:  dry[i*replyLen : (i+1)*replyLen],
		}
	}
	s.run.RunMulti(ctx, calls)
	for i := range calls {
		if calls[i].Err != nil {
			return scriptError(calls[i].Script, s.blame(keys[i], calls[i].Err))
		}
	}
	return nil
}

// deny fills results for a denied set from the dry run's peek views: Allowed
// false and the same RetryAfter everywhere, as the batch script answers.
func deny(reqs []sluice.Request, dry []int64, wait int64, results []sluice.Result) {
	for i, r := range reqs {
		v := dry[i*replyLen : (i+1)*replyLen]
		v[replyAllowed], v[replyRetry] = 0, wait
		results[i] = result(r.Policy, v)
	}
}

// hold makes one reservation of a spread set, as a lone Decide, in the queue
// of its key's node (coalesce.go): under load it shares a call with what is
// queued there. reply gets the decision and the refs a refund needs.
func (s *Store) hold(ctx context.Context, req sluice.Request, key string, reply []int64) error {
	w := &waiter{ctx: ctx, op: opHold, held: reply}
	w.setOne(req, key)
	return s.submit(w)
}

// refund undoes the reservations idx of held, together: each a release in
// the queue of its key's node (coalesce.go). It runs even when the caller's
// context is done — a reservation left in place would deny others until it
// expires — under a timeout of its own (never unbounded).
func (s *Store) refund(ctx context.Context, reqs []sluice.Request, keys []string, held []int64, idx []int) {
	if len(idx) == 0 {
		return
	}
	timeout := s.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	// Errors are dropped: the set is denied either way, and units that could
	// not be given back only make the limit stricter until they expire.
	var wg sync.WaitGroup
	for _, i := range idx {
		h := held[i*replyLen : (i+1)*replyLen]
		w := &waiter{ctx: ctx, op: opRelease, res: sluice.Reservation{Ref1: h[replyRef1], Ref2: h[replyRef2]}}
		w.setOne(reqs[i], keys[i])
		wg.Go(func() { _ = s.submit(w) })
	}
	wg.Wait()
}
