package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// TestSweep: once a key goes idle, the sweep (run by other keys' decisions)
// gives back its expired lease's units at once (in the background), and forgets the spent
// leases of idle keys soon after; the store then has every unused unit back.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	remote := newMemory(clock)
	const every = time.Millisecond
	s := lease.New(remote, lease.WithClock(clock), lease.WithSweepEvery(every))
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 100_000, Period: time.Hour}
	decide := func(key string) {
		t.Helper()
		if res, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: key, Cost: 1}); err != nil || !res.Allowed {
			t.Fatalf("%s: %+v %v", key, res, err)
		}
	}
	const hot = 250
	for range hot { // the hot key's leases grow with its demand: many units
		decide("hot")
	}
	for i := range 50 { // too cold to lease: one store call each, nothing held
		decide(fmt.Sprint("idle", i))
	}
	held := s.Held(&p, "hot")
	if held < 100 {
		t.Fatalf("the hot key holds %d units, want a lease of many", held)
	}
	clock.Advance(s.TTL(&p) + every)
	decide("other") // sweeps
	if got := s.Stats().Held; got != 0 {
		t.Errorf("%d units still held one sweep after the leases expired", got)
	}
	// The sweep gives back in the background: the decision that ran it does
	// not wait for the store.
	testwait.UntilSaw(t, "the sweep's background calls done", func() (bool, string) {
		n := s.Stats().Background
		return n == 0, fmt.Sprint(n, " still running")
	})
	peek, err := remote.Decide(ctx, sluice.Request{Policy: &p, Key: "hot"})
	if err != nil || peek.Remaining != p.Limit-hot {
		t.Errorf("the store has %d of the hot key's units left (%v), want %d: the lease was not given back", peek.Remaining, err, p.Limit-hot)
	}
	for i := 0; s.Stats().Leases > 1; i++ { // "other" is live
		if i > 1000 {
			t.Fatalf("%d leases of idle keys not forgotten after %d sweeps", s.Stats().Leases-1, i)
		}
		clock.Advance(every)
		decide("other")
	}
}
