package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Same-key coalescing: while one call for a (policy, key) is in flight, more
// Decides on it queue up, and the next call decides the whole queue in
// arrival order at once (seq.lua), each request getting what it would have
// got alone in that order. A hot key then costs Redis one call per group, not
// per decision. The first request makes its own call; when a call ends, the
// queue behind it is decided by the next, one goroutine per group: no request
// waits for more than the call before it and its own.

// maxGroup bounds the requests one call decides.
const maxGroup = 64

// flightKey is what a queue shares: one policy (so one P, L, C, T) and one key.
type flightKey struct {
	p   *sluice.Policy
	key string
}

// flights holds a queue per flightKey with a call in flight.
type flights struct {
	mu sync.Mutex
	m  map[flightKey][]*waiter
}

// waiter is one queued Decide.
type waiter struct {
	ctx  context.Context
	req  sluice.Request
	done chan struct{} // closed when res and err are set
	res  sluice.Result
	err  error
}

// decideCoalesced decides req, sharing a call with concurrent Decides on the
// same policy and key.
func (s *Store) decideCoalesced(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	fk := flightKey{req.Policy, req.Key}
	s.fl.mu.Lock()
	queue, busy := s.fl.m[fk]
	if !busy {
		if s.fl.m == nil {
			s.fl.m = map[flightKey][]*waiter{}
		}
		s.fl.m[fk] = nil // a call is in flight: later Decides queue
		s.fl.mu.Unlock()
		r, err := s.decideOne(ctx, req)
		s.handOff(fk)
		return r, err
	}
	w := &waiter{ctx: ctx, req: req, done: make(chan struct{})}
	s.fl.m[fk] = append(queue, w)
	s.fl.mu.Unlock()
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		// The group may still decide this request: an error for a request
		// that was counted errs on the safe side.
		return sluice.Result{}, ctx.Err()
	}
}

// handOff ends a call on fk: the queue behind it, up to maxGroup, is decided
// by the next call, on a goroutine of its own so that every waiter returns
// when its own context ends; with no queue, fk has no call in flight any
// more.
func (s *Store) handOff(fk flightKey) {
	s.fl.mu.Lock()
	defer s.fl.mu.Unlock()
	queue := s.fl.m[fk]
	if len(queue) == 0 {
		delete(s.fl.m, fk)
		return
	}
	n := min(len(queue), maxGroup)
	group := queue[:n:n]
	s.fl.m[fk] = queue[n:]
	go func() {
		s.runGroup(group)
		s.handOff(fk)
	}()
}

// runGroup decides a group in one call and sets every waiter's result. The
// call runs until the latest of the waiters' deadlines, not the first's: a
// waiter that queued last must not fail early because the leader's deadline
// came first, nor every waiter because one of them went away.
func (s *Store) runGroup(group []*waiter) {
	gctx, gcancel := groupContext(group)
	defer gcancel()
	if len(group) == 1 {
		w := group[0]
		w.res, w.err = s.decideOne(gctx, w.req)
		close(w.done)
		return
	}
	ctx, cancel := s.bound(gctx)
	defer cancel()
	p := group[0].req.Policy
	P, L, C, T := policyInts(p)
	vals := make([]int64, 0, 5+len(group))
	vals = append(vals, s.now(), P, L, C, T)
	for _, w := range group {
		vals = append(vals, w.req.Cost)
	}
	args := make([]string, len(vals))
	formatInts(args, vals)
	if s.clock == nil {
		args[0] = "" // server TIME
	}
	script := seqScriptFor(p.Algorithm)
	reply := make([]int64, seqStride*len(group))
	err := s.run.Run(ctx, script, []string{redisKey(s.prefix, p, group[0].req.Key)}, args, reply)
	for i, w := range group {
		if err != nil {
			w.err = scriptError(script, err)
		} else {
			w.res = result(p, reply[seqStride*i:])
		}
		close(w.done)
	}
}

// groupContext carries the first waiter's values, none of the waiters'
// cancellations, and the latest of their deadlines (none if one has none:
// the store's own timeout still bounds the call).
func groupContext(group []*waiter) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(group[0].ctx)
	var latest time.Time
	for _, w := range group {
		dl, ok := w.ctx.Deadline()
		if !ok {
			return base, func() {}
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(base, latest)
}

// seqStride is the number of integers per request in seq.lua's reply.
const seqStride = 5
