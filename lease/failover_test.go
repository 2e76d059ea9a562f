package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// TestOverFailover: leases over a fail-over store over a real redis-server.
// Decisions from a lease never reach the fail-over layer (its observer sees
// exactly the lease layer's store calls); when Redis dies the node spends
// its lease, then the fail policy decides: local decisions, marked degraded,
// or for on_error closed an UnavailableError.
func TestOverFailover(t *testing.T) {
	srv := redistest.Start(t)
	for _, mode := range []failover.Mode{failover.FailLocal, failover.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			p := sluice.Policy{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
			clock := storetest.NewClock(storetest.Epoch)
			fs := failover.New(openRedis(t, srv, clock, 5*time.Second), failover.WithMode(mode), failover.WithClock(clock),
				failover.WithTimeout(5*time.Second), failover.WithLocal(memory.New(memory.WithClock(clock))))
			var observed atomic.Int64
			fs.Observe(func(failover.Call) { observed.Add(1) })
			s := lease.New(fs, lease.WithClock(clock))
			req := sluice.Request{Policy: &p, Key: "k", Cost: 1}
			const n = 200
			for i := range n {
				if res, err := s.Decide(ctx, req); err != nil || !res.Allowed || res.Degraded {
					t.Fatalf("request %d: %+v %v", i, res, err)
				}
				clock.Advance(time.Millisecond)
			}
			st := s.Stats()
			if got := observed.Load(); got != st.StoreCalls || got >= n/4 {
				t.Errorf("failover saw %d calls; the lease layer made %d for %d decisions", got, st.StoreCalls, n)
			}
			srv.Kill()
			defer srv.Restart()
			spendLease(t, s, req)
			failures := fs.Failures()
			res, err := s.Decide(ctx, req)
			if fs.Failures() != failures+1 {
				t.Errorf("failover counted %d failures for the call past the lease, want 1", fs.Failures()-failures)
			}
			switch mode {
			case failover.FailLocal:
				if err != nil || !res.Allowed || !res.Degraded {
					t.Errorf("past the lease on local: %+v %v, want a degraded admission", res, err)
				}
			case failover.FailClosed:
				var unavailable *failover.UnavailableError
				if !errors.As(err, &unavailable) {
					t.Errorf("past the lease on closed: %+v %v, want an UnavailableError", res, err)
				}
			}
			if h := s.Held(&p, "k"); h != 0 {
				t.Errorf("a degraded decision installed a lease of %d units", h)
			}
		})
	}
}
