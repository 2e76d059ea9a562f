package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// testBatch: many goroutines deciding on many keys, with all-or-nothing
// sets among them, at one instant per round, share calls (group commit);
// replaying every batch's items one at a time in the order the batch decided
// them, on the memory store at the same instants, gives every item exactly
// the result it got. So a batch never admits more than deciding alone would,
// and same-key items in one batch see each other's writes. oneSlot gives the
// keys a prefix with a hash tag (on a Cluster: one slot, one queue). Sets are
// drawn among keys on one shard, and with slotted among keys in one slot:
// the others take the cross-slot path, not a batch.
func testBatch(t *testing.T, newStore func(t *testing.T, opts ...redisstore.Option) *redisstore.Store, oneSlot, slotted bool) {
	const goroutines, each, rounds = 48, 8, 3
	clock := storetest.NewClock(storetest.Epoch)
	opts := []redisstore.Option{redisstore.WithClock(clock)}
	if oneSlot {
		opts = append(opts, redisstore.WithPrefix(fmt.Sprintf("{batch}:%d:", time.Now().UnixNano())))
	}
	s := newStore(t, opts...)
	var mu sync.Mutex
	var batches [][]redisstore.BatchItem
	redisstore.OnBatch(s, func(items []redisstore.BatchItem) {
		mu.Lock()
		batches = append(batches, items)
		mu.Unlock()
	})
	ref := memory.New(memory.WithClock(clock))

	type target struct {
		p   *sluice.Policy
		key string
	}
	var targets []target
	for _, a := range sluice.Algorithms {
		p := &sluice.Policy{Name: "batch-" + string(a), Algorithm: a, Limit: 6, Period: time.Minute}
		for k := range 8 {
			targets = append(targets, target{p, fmt.Sprintf("k%d", k)})
		}
	}
	request := func(rng *rand.Rand, tg target) sluice.Request {
		return sluice.Request{Policy: tg.p, Key: tg.key, Cost: int64(rng.IntN(3))} // peeks too
	}
	ctx := context.Background()
	items, calls := 0, 0
	for round := range rounds {
		batches = nil
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				for range each {
					a := targets[rng.IntN(len(targets))]
					if rng.IntN(4) > 0 {
						if _, err := s.Decide(ctx, request(rng, a)); err != nil {
							t.Error(err)
						}
						continue
					}
					b := targets[rng.IntN(len(targets))]
					if b == a || s.ShardOf(a.p, a.key) != s.ShardOf(b.p, b.key) ||
						slotted && redisstore.Slot(s.Key(a.p, a.key)) != redisstore.Slot(s.Key(b.p, b.key)) {
						continue
					}
					res := make([]sluice.Result, 2)
					if err := s.DecideAll(ctx, []sluice.Request{request(rng, a), request(rng, b)}, res); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for i, batch := range batches {
			calls++
			for j, it := range batch {
				items++
				if err := redisstore.CheckAlone(ref, it); err != nil {
					t.Fatalf("round %d, batch %d of %d items, item %d: %v", round, i, len(batch), j, err)
				}
			}
		}
		clock.Advance(7 * time.Second) // a partial refill
	}
	t.Logf("%d items in %d calls", items, calls)
	if calls >= items {
		t.Errorf("%d calls for %d items: none shared a call", calls, items)
	}
}

// testLargeSet: DecideAll sets of 40 keys and of 250, far above the batch
// bound, are decided all or nothing, their long replies intact (packed in
// several parts). On one node a large set goes alone; over several shards
// or slots a set of 40 makes its dry run in the queues of its nodes
// (crossslot.go), one of 250 apart, a call per key.
func testLargeSet(t *testing.T, newStore func(t *testing.T, opts ...redisstore.Option) *redisstore.Store) {
	for _, keys := range []int{40, 250} { // 250: 1,250 reply values
		s := newStore(t, redisstore.WithClock(storetest.NewClock(storetest.Epoch)))
		p := &sluice.Policy{Name: "large", Algorithm: sluice.GCRA, Limit: 5, Period: time.Minute}
		reqs := make([]sluice.Request, keys)
		for i := range reqs {
			reqs[i] = sluice.Request{Policy: p, Key: fmt.Sprintf("k%d", i), Cost: 1 + int64(i%2)}
		}
		res := make([]sluice.Result, keys)
		if err := s.DecideAll(context.Background(), reqs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if want := 4 - int64(i%2); !r.Allowed || r.Remaining != want {
				t.Fatalf("%d keys, request %d: %+v; want admitted with %d remaining", keys, i, r, want)
			}
		}
		reqs[keys-1].Cost = 5 // more than is left: the whole set is denied
		if err := s.DecideAll(context.Background(), reqs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if want := 4 - int64(i%2); r.Allowed || r.Remaining != want || r.RetryAfter != res[0].RetryAfter || r.RetryAfter <= 0 {
				t.Fatalf("%d keys, request %d of the denied set: %+v; want denied, %d remaining, the set's RetryAfter", keys, i, r, want)
			}
		}
	}
}
