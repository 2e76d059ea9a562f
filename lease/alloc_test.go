package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// TestLocalDecisionAllocates: a decision from a held lease allocates nothing
// and makes no store call.
func TestLocalDecisionAllocates(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := lease.New(memory.New(memory.WithClock(clock)), lease.WithClock(clock))
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1_000_000, Period: time.Second}
	req := sluice.Request{Policy: &p, Key: "k", Cost: 1}
	ctx := context.Background()
	for range 300 { // the key warms up, and its leases grow with its demand
		if res, err := s.Decide(ctx, req); err != nil || !res.Allowed {
			t.Fatalf("leasing: %+v %v", res, err)
		}
	}
	if held := s.Held(&p, "k"); held < 100 {
		t.Fatalf("the lease holds %d units, want at least 100 for the runs below", held)
	}
	calls := s.Stats().StoreCalls
	allocs := testing.AllocsPerRun(50, func() {
		if res, err := s.Decide(ctx, req); err != nil || !res.Allowed {
			t.Fatalf("from the lease: %+v %v", res, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per decision from a lease, want 0", allocs)
	}
	if got := s.Stats().StoreCalls; got != calls {
		t.Errorf("%d store calls for decisions from a lease, want none", got-calls)
	}
}
