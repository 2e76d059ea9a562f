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
//  1. Dry run: every request's script in dry mode, sent together (one
//     pipelined round trip per node). If any denies, the set is denied with
//     the largest RetryAfter and nothing has been written — the common case
//     under load costs one round trip and no writes.
//  2. Reserve: admit the requests one at a time, in key order, each as a lone
//     Decide in the queue of its key's node (coalesce.go), so that under load
//     it shares a call with what is queued there. If one is denied after all
//     (another client got there since the dry run), refund the reservations
//     made so far (releases in the same queues) and deny the set. With a
//     client clock each reservation is decided at its call's instant.
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
	now := s.now() // one instant for the whole set, with a client clock
	replies := make([]int64, 2*n*replyLen)
	dry, held := replies[:n*replyLen], replies[n*replyLen:]
	calls := make([]Call, n)
	for i, r := range reqs {
		calls[i] = Call{
			Script: scriptFor(r.Policy.Algorithm),
			Keys:   keys[i : i+1 : i+1],
			Args:   s.requestArgs(modeDry, r, now, false, 0, 0),
			Reply:  dry[i*replyLen : (i+1)*replyLen],
		}
	}
	s.run.RunMulti(ctx, calls)
	denied, wait := false, int64(0)
	for i := range calls {
		if calls[i].Err != nil {
			return scriptError(calls[i].Script, s.blame(keys[i], calls[i].Err))
		}
		if r := calls[i].Reply; r[replyAllowed] == 0 {
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
			return scriptError(calls[i].Script, s.blame(keys[i], err))
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
	w.one[0], w.oneKey[0] = req, key
	w.reqs, w.keys = w.one[:], w.oneKey[:]
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
		w.one[0], w.oneKey[0] = reqs[i], keys[i]
		w.reqs, w.keys = w.one[:], w.oneKey[:]
		wg.Go(func() { _ = s.submit(w) })
	}
	wg.Wait()
}
