package lease_test

import (
	"context"
	"fmt"
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
	for range 250 { // the key warms up, and its leases grow with its demand
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

// TestColdDecisionAllocates: a decision on a key too cold to lease adds no
// allocation to the store's own and makes exactly one store call.
func TestColdDecisionAllocates(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	remote := &countingStore{Store: memory.New(memory.WithClock(clock))}
	s := lease.New(remote, lease.WithClock(clock))
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1_000_000, Period: time.Second}
	const keys = 100
	reqs := make([]sluice.Request, keys)
	for i := range reqs {
		reqs[i] = sluice.Request{Policy: &p, Key: fmt.Sprint("k", i), Cost: 1}
	}
	ctx := context.Background()
	step := s.TTL(&p) / keys // each key asks once per TTL: never leased
	i := 0
	decide := func() {
		clock.Advance(step)
		if res, err := s.Decide(ctx, reqs[i%keys]); err != nil || !res.Allowed {
			t.Fatalf("cold decision: %+v %v", res, err)
		}
		i++
	}
	for range 2 * keys { // every key known to the store and to the cold table
		decide()
	}
	calls := remote.calls()
	allocs := testing.AllocsPerRun(3*keys, decide)
	if allocs != 0 {
		t.Errorf("%v allocations per cold decision, want 0", allocs)
	}
	if got, want := remote.calls()-calls, int64(3*keys+1); got != want {
		t.Errorf("%d store calls for %d cold decisions, want one each", got, want)
	}
	if st := s.Stats(); st.Leases != 0 || st.StoreCalls != st.Decisions || st.Direct != st.Decisions {
		t.Errorf("%+v: want every decision sent as it came, no lease", st)
	}
}
