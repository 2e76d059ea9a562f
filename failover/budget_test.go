package failover_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
)

// TestMarkStartBudget: a decision marked by MarkStart gets what is left of
// the maximum timeout since the mark. Its call to a stalled primary ends by
// then (timed out, decided by the fail policy); with nothing left, the
// primary is not called at all and the breaker is not fed. Unmarked calls
// keep their own timeout.
func TestMarkStartBudget(t *testing.T) {
	const max = 2 * time.Second
	p := &flaky{Store: memory.New(), block: true}
	p.down.Store(true)
	s := failover.New(p, failover.WithMode(failover.FailClosed), failover.WithAdaptiveTimeout(max, max),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 1 << 20}))
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}

	// 1.8 s of the 2 s spent before the call: the stalled call is cut after
	// what is left, well before its own 2 s.
	start := time.Now()
	_, err := s.Decide(failover.MarkStart(ctx, start.Add(-max+200*time.Millisecond)), req)
	took := time.Since(start)
	if !errors.Is(err, failover.ErrUnavailable) || !errors.Is(err, failover.ErrTimeout) {
		t.Fatalf("marked call to a stalled primary: %v, want a timeout decided by the fail policy", err)
	}
	if took >= max-200*time.Millisecond/2 {
		t.Errorf("a call with 200ms of its budget left took %v", took)
	}
	if p.calls.Load() != 1 || s.Failures() != 1 {
		t.Errorf("%d primary calls, %d failures; want 1 and 1", p.calls.Load(), s.Failures())
	}

	// Nothing left: no call, no failure, the fail policy at once.
	start = time.Now()
	_, err = s.Decide(failover.MarkStart(ctx, start.Add(-max)), req)
	if !errors.Is(err, failover.ErrUnavailable) || !errors.Is(err, failover.ErrTimeout) {
		t.Fatalf("marked call with its budget spent: %v, want a timeout decided by the fail policy", err)
	}
	if p.calls.Load() != 1 || s.Failures() != 1 {
		t.Errorf("with the budget spent: %d primary calls, %d failures; want still 1 and 1", p.calls.Load(), s.Failures())
	}

	// Unmarked, and marked just now: the primary is asked, and healthy it
	// answers.
	p.down.Store(false)
	for _, c := range []struct {
		name string
		mark bool
	}{{"unmarked", false}, {"marked now", true}} {
		cctx := ctx
		if c.mark {
			cctx = failover.MarkStart(ctx, time.Now())
		}
		if r, err := s.Decide(cctx, req); err != nil || r.Degraded {
			t.Errorf("%s, healthy primary: %+v, %v", c.name, r, err)
		}
	}
}
