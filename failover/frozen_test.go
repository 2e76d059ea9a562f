package failover_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/redisstore"
)

// frozenMax is the maximum (and minimum) adaptive timeout of
// TestFrozenWithinMax: every call to the frozen Redis waits all of it, so a
// decision that makes or waits for two calls in a row takes twice as long.
const frozenMax = 1500 * time.Millisecond

// TestFrozenWithinMax freezes redis-server (SIGSTOP) and checks that no
// decision takes longer than the fail-over Store's maximum timeout plus
// chaosMargin (less this process' stalls), whatever it waits for: a call on a
// connection used by one call at a time (its socket deadline is the Redis
// store's own 10 s backstop, which must not be what ends it), the group
// commit's queue, a lease's reservation in flight for its key, its releases
// and renewals. The breaker is kept closed, so every decision meets the
// frozen Redis; the fail policy (local) decides them all.
func TestFrozenWithinMax(t *testing.T) {
	t.Parallel()
	m := startStallMeter(t)
	srv := redistest.Start(t)
	rs := openRedis(t, srv.URL(), redisstore.WithTimeout(10*time.Second))
	fs := failover.New(rs, failover.WithMode(failover.FailLocal), failover.WithAdaptiveTimeout(frozenMax, frozenMax),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 1 << 20}))
	ls := lease.New(fs, lease.WithTTL(time.Minute), lease.WithMaxLease(3))
	t.Cleanup(func() { _ = ls.Shutdown(ctx) }) // releases to a frozen Redis fail
	p := &sluice.Policy{Name: "frozen", Algorithm: sluice.GCRA, Limit: 1 << 30, Period: time.Hour}
	for i := range 4 { // leases on every key, and the Lua loaded
		for _, s := range []sluice.Store{fs, ls} {
			if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: fmt.Sprint("k", i), Cost: 1}); err != nil || r.Degraded {
				t.Fatalf("before the freeze: %+v, %v", r, err)
			}
		}
	}

	bound := frozenMax + chaosMargin
	var mu sync.Mutex
	var worst time.Duration
	var decisions int
	decide := func(what string, s sluice.Store, reqs ...sluice.Request) {
		start := time.Now()
		results := make([]sluice.Result, len(reqs))
		var err error
		if len(reqs) == 1 {
			results[0], err = s.Decide(ctx, reqs[0])
		} else {
			err = s.DecideAll(ctx, reqs, results)
		}
		d := m.active(start, time.Now())
		mu.Lock()
		defer mu.Unlock()
		decisions++
		worst = max(worst, d)
		if err != nil || !results[0].Degraded {
			t.Errorf("%s with Redis frozen: %+v, %v; want a local decision", what, results, err)
		}
		if d > bound {
			t.Errorf("%s with Redis frozen took %v (not counting stalls), want <= %v", what, d, bound)
		}
	}

	srv.Pause()
	t.Cleanup(srv.Resume)
	// One at a time: each connection carries one call at a time.
	for i := range 2 {
		decide("a lone Decide", fs, sluice.Request{Policy: p, Key: fmt.Sprint("lone", i), Cost: 1})
	}
	// Together: group commit queues, DecideAll sets, and leases whose units
	// run out (3 at most) so that decisions reserve, wait for each other's
	// reservations and renewals, and give units back.
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			for i := range 3 {
				key := fmt.Sprint("k", (w+i)%2)
				switch w % 3 {
				case 0:
					decide("a Decide", fs, sluice.Request{Policy: p, Key: key, Cost: 1})
				case 1:
					decide("a DecideAll", fs, sluice.Request{Policy: p, Key: key, Cost: 1}, sluice.Request{Policy: p, Key: key + "b", Cost: 1})
				default:
					decide("a leased Decide", ls, sluice.Request{Policy: p, Key: key, Cost: 2})
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d decisions with Redis frozen, the slowest %v not counting stalls (bound %v); the longest stall of the process %v",
		decisions, worst.Round(time.Millisecond), bound, m.worst().Round(time.Millisecond))
}
