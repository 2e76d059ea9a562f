package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
	"github.com/sluicehq/sluice/storetest"
)

// testChargeCoalescing: 64 goroutines charging one key at one instant share
// calls, every charge is recorded once, and each sees what was left after
// it as if alone in some order: L−1 down to L−256 (owed), once each. A
// ChargeAll set over keys in different slots or shards goes to each node
// and answers as one charge at a time does.
func testChargeCoalescing(t *testing.T, c rueidis.Client) {
	const goroutines, each, limit = 64, 4, 100
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			r := &counting{Runner: redisstore.NewRunner(c), runs: map[string]int{}}
			clock := storetest.NewClock(storetest.Epoch)
			s := redisstore.NewWithRunner(r, append(rstest.Defaults(), redisstore.WithClock(clock))...)
			p := &sluice.Policy{Name: "hot", Algorithm: a, Limit: limit, Period: time.Minute}
			var mu sync.Mutex
			var remaining []int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						res, err := s.Charge(context.Background(), sluice.Request{Policy: p, Key: "k", Cost: 1})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						remaining = append(remaining, res.Remaining)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			slices.Sort(remaining)
			for i, got := range remaining {
				if want := int64(limit - goroutines*each + i); got != want {
					t.Fatalf("remaining counts seen by the charges: %v; want %d to %d once each", remaining, limit-goroutines*each, limit-1)
				}
			}
			calls := 0
			for _, n := range r.runs {
				calls += n
			}
			if calls >= goroutines*each {
				t.Errorf("%d script calls for %d charges on one key: none shared", calls, goroutines*each)
			}
			t.Logf("%d script calls for %d charges: %v", calls, goroutines*each, r.runs)

			other := &sluice.Policy{Name: "other", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}
			reqs := []sluice.Request{{Policy: p, Key: "k", Cost: 3}, {Policy: other, Key: "x", Cost: 12}, {Policy: p, Key: "y", Cost: 2}, {Policy: p, Key: "k", Cost: 1}}
			got := make([]sluice.Result, len(reqs))
			if err := s.ChargeAll(context.Background(), reqs, got); err != nil {
				t.Fatal(err)
			}
			want := []sluice.Result{
				{Limit: limit, Remaining: limit - goroutines*each - 3, RetryAfter: got[0].RetryAfter, ResetAfter: got[0].ResetAfter},
				{Limit: 10, Remaining: -2, RetryAfter: time.Minute, ResetAfter: time.Minute},
				{Allowed: true, Limit: limit, Remaining: limit - 2, ResetAfter: got[2].ResetAfter},
				{Limit: limit, Remaining: limit - goroutines*each - 4, RetryAfter: got[3].RetryAfter, ResetAfter: got[3].ResetAfter},
			}
			if !slices.Equal(got, want) || got[0].RetryAfter <= 0 || got[3].RetryAfter < got[0].RetryAfter {
				t.Fatalf("ChargeAll:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
