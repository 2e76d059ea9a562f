package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// FuzzBatch decodes its input into one batch — single requests, holds (a
// spread set's reservations) and all-or-nothing sets over a few keys of every
// algorithm, with runs on one key, sets between them, peeks and costs above
// one — decides it in one call,
// and wants every item's result to equal the memory store's, deciding the
// items alone in the order the batch did.
func FuzzBatch(f *testing.F) {
	s := openForFuzz(f)
	var pols []*sluice.Policy
	for _, a := range sluice.Algorithms {
		pols = append(pols, &sluice.Policy{Name: "fuzz-" + string(a), Algorithm: a, Limit: 3, Period: time.Minute})
	}
	f.Add([]byte{0, 0, 5, 0, 10, 0, 0, 0, 3, 1, 0, 0})             // a run of four on one key, a set between
	f.Add([]byte{1, 7, 3, 7, 2, 7, 6, 8, 3, 2, 0, 9, 11, 9, 4, 3}) // keys of several algorithms
	f.Add([]byte{5, 1, 5, 1, 5, 1, 5, 1, 3, 1, 0, 1, 13, 12, 8, 14})
	f.Add([]byte{})
	round := 0
	f.Fuzz(func(t *testing.T, in []byte) {
		round++
		clock := storetest.NewClock(storetest.Epoch)
		s.clock, s.prefix = clock, fmt.Sprintf("fuzz%d:", round)
		ref := memory.New(memory.WithClock(clock))
		target := func(b byte) sluice.Request {
			return sluice.Request{Policy: pols[int(b)%len(pols)], Key: fmt.Sprintf("k%d", int(b)/len(pols)%3)}
		}
		var batch []*waiter
		size := 0
		for i := 0; i+1 < len(in) && size < maxBatch; i += 2 {
			kind, cost := in[i]%4, int64(in[i]/4%3)
			a := target(in[i+1])
			a.Cost = cost
			w := &waiter{ctx: context.Background(), reqs: []sluice.Request{a}}
			if kind == 2 { // a spread set's reservation, answered as a lone Decide
				w.op, w.held = opHold, make([]int64, replyLen)
			}
			if b := target(in[i+1] / 3); kind == 3 && b != target(in[i+1]) {
				b.Cost = int64(in[i] / 12 % 3)
				w.reqs, w.all = append(w.reqs, b), true
			}
			for _, r := range w.reqs {
				w.keys = append(w.keys, s.Key(r.Policy, r.Key))
			}
			batch = append(batch, w)
			size += len(w.reqs)
		}
		if len(batch) == 0 {
			return
		}
		s.runBatch(context.Background(), batch)
		for i, w := range arrange(batch) {
			if w.err != nil {
				t.Fatal(w.err)
			}
			if err := CheckAlone(ref, BatchItem{Reqs: w.reqs, All: w.all, Results: holdResults(w)}); err != nil {
				t.Fatalf("item %d of %d: %v", i, len(batch), err)
			}
		}
	})
}
