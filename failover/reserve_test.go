package failover_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// TestReserve: reservations go to the primary under the breaker; when it
// fails, the fail policy decides the request's own cost and says so
// (Degraded), and there is nothing to give back for it.
func TestReserve(t *testing.T) {
	for _, mode := range []failover.Mode{failover.FailOpen, failover.FailClosed, failover.FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			p := newFlaky(clock)
			s := failover.New(p, failover.WithMode(mode), failover.WithClock(clock),
				failover.WithBreaker(failover.BreakerSettings{MinCalls: 3, FailureRate: 1, Cooldown: time.Minute, Probes: 1}))
			if !s.CanReserve() {
				t.Fatal("CanReserve is false over a memory store")
			}
			req := sluice.Request{Policy: policy, Key: "k", Cost: 2}
			r, err := s.Reserve(ctx, req, 10)
			if err != nil || r.Granted != 10 || r.Result.Degraded {
				t.Fatalf("healthy: %+v %v, want 10 units from the primary", r, err)
			}
			if err := s.Release(ctx, req, r, 10); err != nil {
				t.Fatalf("healthy release: %v", err)
			}
			if peek, _ := p.Decide(ctx, sluice.Request{Policy: policy, Key: "k"}); peek.Remaining != policy.Limit {
				t.Errorf("after the release the primary has %d left, want %d", peek.Remaining, policy.Limit)
			}

			p.down.Store(true)
			for i := range 4 { // the third failure opens the breaker
				calls := p.calls.Load()
				r, err := s.Reserve(ctx, req, 10)
				if made, want := p.calls.Load()-calls, int64(min(1, 3-i)); made != want {
					t.Errorf("reservation %d made %d calls to the primary (breaker %v)", i, made, s.State())
				}
				switch mode {
				case failover.FailClosed:
					if !errors.Is(err, failover.ErrUnavailable) {
						t.Fatalf("reservation %d: %+v %v, want ErrUnavailable", i, r, err)
					}
					continue
				default:
					if err != nil || !r.Result.Degraded || !r.Result.Allowed || r.Granted != req.Cost {
						t.Fatalf("reservation %d: %+v %v, want the cost admitted by the fail policy", i, r, err)
					}
				}
				calls = p.calls.Load()
				if err := s.Release(ctx, req, r, r.Granted); err != nil || p.calls.Load() != calls {
					t.Errorf("releasing a degraded reservation: %v, %d calls", err, p.calls.Load()-calls)
				}
			}
			if s.State() != failover.BreakerOpen {
				t.Errorf("breaker %v after failed reservations, want open", s.State())
			}
		})
	}
}

// TestCannotReserve: over a primary that cannot reserve, Reserve and
// Release refuse without calling it, and CanReserve says so.
func TestCannotReserve(t *testing.T) {
	s := failover.New(struct{ sluice.Store }{memory.New()})
	if s.CanReserve() {
		t.Error("CanReserve is true over a store without Reserve")
	}
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}
	if _, err := s.Reserve(ctx, req, 5); !errors.Is(err, sluice.ErrNotReservable) {
		t.Errorf("Reserve: %v, want ErrNotReservable", err)
	}
	if err := s.Release(ctx, req, sluice.Reservation{Granted: 5}, 5); !errors.Is(err, sluice.ErrNotReservable) {
		t.Errorf("Release: %v, want ErrNotReservable", err)
	}
}
