package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// BatchItem is one item of a batch as a test sees it: a Decide's request, or
// a DecideAll set (All), or a spread set's dry run of one key (Dry).
type BatchItem struct {
	Reqs    []sluice.Request
	All     bool
	Dry     bool
	Results []sluice.Result // what the call answered
}

// OnBatch has s call f with the items of each batch, in the order the call
// decided them, once the call has returned (an item's Results are unset if
// the call failed).
func OnBatch(s *Store, f func([]BatchItem)) {
	s.onBatch = func(order []*waiter) {
		items := make([]BatchItem, len(order))
		for i, w := range order {
			items[i] = BatchItem{Reqs: w.reqs, All: w.all, Dry: w.op == opDry, Results: holdResults(w)}
		}
		f(items)
	}
}

// holdResults returns w's results: a hold's (a spread set's reservation,
// answered like a lone Decide) from its reply.
func holdResults(w *waiter) []sluice.Result {
	if w.op == opHold {
		if w.err != nil {
			return nil
		}
		return []sluice.Result{result(w.reqs[0].Policy, w.held)}
	}
	return append([]sluice.Result(nil), w.results...)
}

// CheckAlone decides the item's requests alone on ref (a store at the same
// instant, e.g. the memory store) and reports how its Results differ.
func CheckAlone(ref sluice.Store, it BatchItem) error {
	ctx := context.Background()
	want := make([]sluice.Result, len(it.Reqs))
	var err error
	if it.All {
		err = ref.DecideAll(ctx, it.Reqs, want)
	} else {
		want[0], err = ref.Decide(ctx, it.Reqs[0])
	}
	if err != nil {
		return err
	}
	for k := range want {
		if it.Results[k] != want[k] {
			return fmt.Errorf("request %d (%+v, all %v): got %+v, want %+v as alone in that order", k, it.Reqs[k], it.All, it.Results[k], want[k])
		}
	}
	return nil
}

// DryRuns makes the dry run of a spread set of reqs (two or more, on one
// node) both ways it goes: each request alone (main.lua's mode 'd') and all
// in one call of decide_batch ('d' records), as when they queued behind a
// call in flight. It returns each request's reply, allowed, remaining,
// retry_after, reset_after and delay in µs, both ways.
func DryRuns(ctx context.Context, s *Store, reqs []sluice.Request) (alone, queued [][5]int64, err error) {
	if len(reqs) < 2 {
		return nil, nil, fmt.Errorf("DryRuns of %d requests: a call of one goes alone", len(reqs))
	}
	alone, queued = make([][5]int64, len(reqs)), make([][5]int64, len(reqs))
	ws := make([]*waiter, len(reqs))
	for i, r := range reqs {
		w := &waiter{}
		w.setDry(ctx, r, s.Key(r.Policy, r.Key), alone[i][:])
		s.runBatch(ctx, []*waiter{w})
		if w.err != nil {
			return nil, nil, w.err
		}
		ws[i] = &waiter{}
		ws[i].setDry(ctx, r, s.Key(r.Policy, r.Key), queued[i][:])
	}
	s.runBatch(ctx, ws)
	for _, w := range ws {
		if w.err != nil {
			return nil, nil, w.err
		}
	}
	return alone, queued, nil
}

// HoldQueue has s act as if a call were in flight on the queue of the node of
// (p, key) (and on nothing else): what comes for it queues up until release,
// which sends the queue as the next call, as the end of a call does.
func HoldQueue(s *Store, p *sluice.Policy, key string) (release func()) {
	qk, _ := s.queueOf([]string{s.Key(p, key)})
	if !s.q.join(qk) {
		panic("HoldQueue: a call is in flight on " + key)
	}
	return func() { s.handOff(&s.q, qk) }
}

// Queued counts the items queued on s: dry runs, and the others.
func Queued(s *Store) (dry, others int) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	for _, queue := range s.q.m {
		for _, w := range queue {
			if w.op == opDry {
				dry++
			} else {
				others++
			}
		}
	}
	return dry, others
}

// HashStateLibrary is the function library of BenchmarkStateLayout's
// prototype: header.lua, store (which replaces its read and put), gcra.lua,
// then batch, which registers the function.
func HashStateLibrary(store, batch string) string {
	return join([]string{"#!lua name=sluice_hashstate", "local PXAT = true", luaHeader, store, luaGCRA, batch})
}
