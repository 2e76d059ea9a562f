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

// testCoalescing: 64 goroutines deciding on one key at one instant share
// calls, and every caller still gets what it would have got alone in some
// order: exactly the limit is admitted, the admitted see each remaining count
// (and a leaky bucket each delay) once, the denied see none left.
func testCoalescing(t *testing.T, c rueidis.Client) {
	const goroutines, each, limit = 64, 4, 100
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			r := &counting{Runner: redisstore.NewRunner(c), runs: map[string]int{}}
			clock := storetest.NewClock(storetest.Epoch)
			s := redisstore.NewWithRunner(r, append(rstest.Defaults(), redisstore.WithClock(clock))...)
			p := &sluice.Policy{Name: "hot", Algorithm: a, Limit: limit, Period: time.Minute}
			var mu sync.Mutex
			var admitted []sluice.Result
			denied := 0
			var wg sync.WaitGroup
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						res, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "k", Cost: 1})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if res.Allowed {
							admitted = append(admitted, res)
						} else if denied++; res.Remaining != 0 || res.RetryAfter <= 0 {
							t.Errorf("denied with %+v", res)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(admitted) != limit || denied != goroutines*each-limit {
				t.Fatalf("%d admitted, %d denied; want %d and %d", len(admitted), denied, limit, goroutines*each-limit)
			}
			// The group's state was written, with its expiry: a peek finds
			// the limit used up.
			if peek, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "k"}); err != nil || peek.Remaining != 0 {
				t.Errorf("peek after the burst: %+v, %v; want 0 remaining", peek, err)
			}
			if at, err := c.Do(context.Background(), c.B().Pexpiretime().Key(s.Key(p, "k")).Build()).AsInt64(); err != nil || at <= 0 {
				t.Errorf("PEXPIRETIME of the hot key: %d, %v; want an expiry", at, err)
			}
			var remaining, delays []int64
			for _, res := range admitted {
				remaining = append(remaining, res.Remaining)
				delays = append(delays, int64(res.Delay/p.EmissionInterval()))
			}
			slices.Sort(remaining)
			slices.Sort(delays)
			for i := range int64(limit) {
				if remaining[i] != i {
					t.Fatalf("remaining counts seen by the admitted: %v; want 0 to %d once each", remaining, limit-1)
				}
				if a == sluice.LeakyBucket && delays[i] != i {
					t.Fatalf("leaky bucket delays in T: %v; want 0 to %d once each", delays, limit-1)
				}
			}
			calls := 0
			for _, n := range r.runs {
				calls += n
			}
			if calls >= goroutines*each {
				t.Errorf("%d script calls for %d decisions on one key: none shared", calls, goroutines*each)
			}
			t.Logf("%d script calls for %d decisions (%.2f per decision): %v", calls, goroutines*each, float64(calls)/float64(goroutines*each), r.runs)
		})
	}
}
