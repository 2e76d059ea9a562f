package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// BatchItem is one item of a batch as a test sees it: a Decide's request, or
// a DecideAll set (All).
type BatchItem struct {
	Reqs    []sluice.Request
	All     bool
	Results []sluice.Result // what the call answered
}

// OnBatch has s call f with the items of each batch, in the order the call
// decided them, once the call has returned (an item's Results are unset if
// the call failed).
func OnBatch(s *Store, f func([]BatchItem)) {
	s.onBatch = func(order []*waiter) {
		items := make([]BatchItem, len(order))
		for i, w := range order {
			items[i] = BatchItem{Reqs: w.reqs, All: w.all, Results: holdResults(w)}
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
