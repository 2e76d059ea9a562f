package rstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// CrossSlotRace: goroutines race all-or-nothing checks of a per-user limit and
// a global one. On a Cluster the two keys live in different slots, so the
// cross-slot path runs, and a reservation may lose its race and be refunded.
// Whatever the interleaving, no limit is exceeded, and after the run each key
// holds exactly the units of the admitted checks: refunds gave back exactly
// what they took. The clock stands still, which makes the buckets' refunds
// exact too (a refund keeps back the refill that passed since the reservation).
func CrossSlotRace(t *testing.T, tg Target) {
	for _, algs := range [][2]sluice.Algorithm{
		{sluice.SlidingLog, sluice.FixedWindow},
		{sluice.GCRA, sluice.TokenBucket},
		{sluice.SlidingWindow, sluice.LeakyBucket},
	} {
		t.Run(string(algs[0])+"+"+string(algs[1]), func(t *testing.T) {
			t.Parallel()
			const users, perUser, global = 4, 20, 50
			clock := storetest.NewClock(storetest.Epoch) // stands still
			s := tg.New(t, redisstore.WithClock(clock))
			user := &sluice.Policy{Name: "user", Algorithm: algs[0], Limit: perUser, Period: time.Hour}
			all := &sluice.Policy{Name: "global", Algorithm: algs[1], Limit: global, Period: time.Hour}
			var mu sync.Mutex
			admitted := map[string]int64{}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := string(rune('a' + g%users))
					for range 40 {
						reqs := []sluice.Request{{Policy: user, Key: key, Cost: 1}, {Policy: all, Key: "all", Cost: 1}}
						res := make([]sluice.Result, 2)
						if err := s.DecideAll(context.Background(), reqs, res); err != nil {
							t.Error(err)
							return
						}
						if res[0].Allowed != res[1].Allowed {
							t.Errorf("half a check admitted: %+v", res)
							return
						}
						if res[0].Allowed {
							mu.Lock()
							admitted[key]++
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			var total int64
			for key, n := range admitted {
				total += n
				if n > perUser {
					t.Errorf("user %s admitted %d > %d", key, n, perUser)
				}
				peek, err := s.Decide(context.Background(), sluice.Request{Policy: user, Key: key})
				if err != nil || peek.Remaining != perUser-n {
					t.Errorf("user %s: %d admitted but %+v (%v) left: a refund did not give back exactly what it took", key, n, peek, err)
				}
			}
			if total > global {
				t.Fatalf("admitted %d > the global %d", total, global)
			}
			peek, err := s.Decide(context.Background(), sluice.Request{Policy: all, Key: "all"})
			if err != nil || peek.Remaining != global-total {
				t.Fatalf("global: %d admitted but %+v (%v) left", total, peek, err)
			}
			t.Logf("admitted %d of 320 checks: %v", total, admitted)
		})
	}
}
