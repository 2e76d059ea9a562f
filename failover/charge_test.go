package failover_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func (f *flaky) Charge(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return sluice.Result{}, err
	}
	return f.Store.Charge(ctx, req)
}

func (f *flaky) ChargeAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.ChargeAll(ctx, reqs, results)
}

var owed = &sluice.Policy{Name: "owed", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}

// Charges reach a healthy primary as they are, and a charge that leaves the
// key owing keeps it denied under FailLocal once the primary is away.
func TestChargeHealthy(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	s := failover.New(p, failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Second}))
	r, err := s.Charge(ctx, sluice.Request{Policy: owed, Key: "k", Cost: 15})
	if err != nil || r.Degraded || r.Allowed || r.Remaining != -5 || r.RetryAfter != time.Minute {
		t.Fatalf("charge of 15 of 10: %+v, %v; want the primary's, owing 5", r, err)
	}
	if got, _ := p.Store.Decide(ctx, sluice.Request{Policy: owed, Key: "k"}); got.Allowed {
		t.Fatalf("the primary did not record the charge: %+v", got)
	}
	p.down.Store(true)
	clock.Advance(10 * time.Second)
	d, err := s.Decide(ctx, sluice.Request{Policy: owed, Key: "k", Cost: 1})
	if err != nil || !d.Degraded || d.Allowed || d.RetryAfter != 50*time.Second {
		t.Fatalf("the owing key with the primary away: %+v, %v; want denied until the primary's RetryAfter", d, err)
	}
}

// With the primary away, FailLocal records a charge on the local store,
// under the divided policy; FailOpen drops it and says so (Degraded);
// FailClosed returns ErrUnavailable, so the caller knows it was not
// recorded.
func TestChargeDegraded(t *testing.T) {
	for _, mode := range []failover.Mode{failover.FailLocal, failover.FailOpen, failover.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			p := newFlaky(clock)
			local := memory.New(memory.WithClock(clock))
			s := failover.New(p, failover.WithMode(mode), failover.WithLocal(local), failover.WithNodes(2),
				failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Second}))
			p.down.Store(true)
			r, err := s.Charge(ctx, sluice.Request{Policy: owed, Key: "k", Cost: 8})
			results := make([]sluice.Result, 2)
			errAll := s.ChargeAll(ctx, []sluice.Request{{Policy: owed, Key: "k", Cost: 1}, {Policy: owed, Key: "j", Cost: 2}}, results)
			switch mode {
			case failover.FailLocal: // 8 of the 5 each of 2 nodes may take
				if err != nil || errAll != nil || !r.Degraded || r.Allowed || r.Remaining != -3 || r.Limit != 5 {
					t.Fatalf("charge: %+v, %v; want recorded locally, owing 3 of 5", r, err)
				}
				if !results[0].Degraded || results[0].Remaining != -4 || !results[1].Allowed || results[1].Remaining != 3 {
					t.Fatalf("ChargeAll: %+v, %v", results, errAll)
				}
				if d, _ := s.Decide(ctx, sluice.Request{Policy: owed, Key: "k", Cost: 1}); d.Allowed || !d.Degraded {
					t.Fatalf("a request on the key charged locally: %+v, want denied", d)
				}
			case failover.FailOpen:
				if err != nil || errAll != nil || !r.Degraded || !r.Allowed || !results[0].Degraded || !results[1].Degraded {
					t.Fatalf("charge: %+v, %v; ChargeAll %+v, %v; want Degraded, nothing recorded", r, err, results, errAll)
				}
				if got, _ := local.Decide(ctx, sluice.Request{Policy: owed, Key: "k"}); got.Remaining != 10 {
					t.Fatalf("FailOpen charged the local store: %+v", got)
				}
			case failover.FailClosed:
				if !errors.Is(err, failover.ErrUnavailable) || !errors.Is(err, errDown) || !errors.Is(errAll, failover.ErrUnavailable) {
					t.Fatalf("charge: %v; ChargeAll %v; want ErrUnavailable wrapping the cause", err, errAll)
				}
			}
			p.down.Store(false)
			clock.Advance(time.Second)
			if got, _ := p.Store.Decide(ctx, sluice.Request{Policy: owed, Key: "k"}); got.Remaining != 10 {
				t.Fatalf("the primary, down then, holds a charge: %+v", got)
			}
		})
	}
}

// A primary that cannot charge gets no call.
func TestCannotCharge(t *testing.T) {
	s := failover.New(errStore{errDown})
	if _, err := s.Charge(ctx, sluice.Request{Policy: owed, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrNotChargeable) {
		t.Fatalf("Charge on a primary that cannot charge: %v, want ErrNotChargeable", err)
	}
	if err := s.ChargeAll(ctx, []sluice.Request{{Policy: owed, Key: "k", Cost: 1}}, make([]sluice.Result, 1)); !errors.Is(err, sluice.ErrNotChargeable) {
		t.Fatalf("ChargeAll on a primary that cannot charge: %v, want ErrNotChargeable", err)
	}
}
