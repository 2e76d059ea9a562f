package redisstore

import "github.com/sluicehq/sluice"

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
			items[i] = BatchItem{Reqs: w.reqs, All: w.all, Results: append([]sluice.Result(nil), w.results...)}
		}
		f(items)
	}
}
