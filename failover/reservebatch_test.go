package failover_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestReserveSharedCallFailsOnce: reservations of many keys made at once on
// a frozen Redis (SIGSTOP) queue behind the one in flight and share calls;
// when they all time out the breaker counts one failure, not one per
// reservation, and each reservation fails closed.
func TestReserveSharedCallFailsOnce(t *testing.T) {
	srv := redistest.Start(t)
	rs, err := redisstore.Open(srv.URL(), redisstore.WithTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if _, err := rs.Reserve(ctx, sluice.Request{Policy: policy, Key: "warm", Cost: 1}, 1); err != nil {
		t.Fatal(err) // the library is loaded before Redis freezes
	}
	s := failover.New(rs, failover.WithMode(failover.FailClosed), failover.WithTimeout(2*time.Second),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 2, FailureRate: 1, Cooldown: time.Minute}))
	srv.Pause()
	defer srv.Resume()
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := s.Reserve(ctx, sluice.Request{Policy: policy, Key: fmt.Sprintf("k%d", i), Cost: 1}, 5)
			if err == nil || r.Granted != 0 {
				t.Errorf("reservation %d on a frozen Redis under FailClosed: %+v, %v; want an error, nothing granted", i, r, err)
			}
		})
	}
	wg.Wait()
	if s.Failures() != n || s.State() != failover.BreakerClosed {
		t.Fatalf("%d reservations failing together: %d failures, breaker %v; want %d failures, closed (one event)", n, s.Failures(), s.State(), n)
	}
	srv.Resume()
	r, err := s.Reserve(ctx, sluice.Request{Policy: policy, Key: "after", Cost: 1}, 5)
	if err != nil || r.Result.Degraded || r.Granted != 5 {
		t.Fatalf("after the thaw: %+v, %v; want 5 units from Redis", r, err)
	}
}
