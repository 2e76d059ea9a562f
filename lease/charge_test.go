package lease_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// settled waits (up to 30s) until s has no store call in flight in the
// background, so that its store calls can be counted.
func settled(t *testing.T, s *lease.Store) lease.Stats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.Stats()
		if st.Background == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d store calls still in the background after 30s", st.Background)
		}
		time.Sleep(time.Millisecond)
	}
}

// leaseUp makes s hold at least n units of (p, "k"), with decisions.
func leaseUp(t *testing.T, s *lease.Store, p *sluice.Policy, n int64) {
	t.Helper()
	for i := 0; s.Held(p, "k") < n; i++ {
		if res, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "k", Cost: 1}); err != nil || !res.Allowed || i > 200 {
			t.Fatalf("decision %d while leasing up: %+v, %v", i, res, err)
		}
	}
}

// TestChargeSpendsLeaseFirst: a charge takes what the key's lease holds,
// without a store call when that covers it, and charges only the rest to the
// remote store, which records it beyond the limit.
func TestChargeSpendsLeaseFirst(t *testing.T) {
	ctx := context.Background()
	for _, p := range leasedPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			remote := newMemory(clock)
			s := lease.New(remote, lease.WithClock(clock))
			leaseUp(t, s, &p, 3)
			held := s.Held(&p, "k")
			before := settled(t, s)
			res, err := s.Charge(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 2})
			if err != nil || !res.Allowed || res.Remaining < held-2 {
				t.Fatalf("a charge of 2 with %d leased: %+v, %v", held, res, err)
			}
			if got := s.Held(&p, "k"); got != held-2 {
				t.Fatalf("after a charge of 2, %d held, want %d", got, held-2)
			}
			if after := settled(t, s); after.StoreCalls != before.StoreCalls {
				t.Fatalf("a charge the lease covered made %d store calls", after.StoreCalls-before.StoreCalls)
			}
			stored, _ := remote.Decide(ctx, sluice.Request{Policy: &p, Key: "k"})
			big := 2 * p.Capacity()
			res, err = s.Charge(ctx, sluice.Request{Policy: &p, Key: "k", Cost: big})
			if err != nil || res.Allowed || res.Remaining >= 0 {
				t.Fatalf("a charge of %d: %+v, %v; want the key owing", big, res, err)
			}
			if got := s.Held(&p, "k"); got != 0 {
				t.Fatalf("after a charge beyond the lease, %d held, want 0", got)
			}
			// The store recorded the rest: what it had left, less the charge
			// beyond what the lease held.
			if want := stored.Remaining - (big - (held - 2)); res.Remaining != want {
				t.Fatalf("the store's answer: %+v, want %d left", res, want)
			}
			if d, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}); err != nil || d.Allowed {
				t.Fatalf("a request on the owing key: %+v, %v; want denied", d, err)
			}
		})
	}
}

// TestPeekSeesTheLease: a peek is allowed while the node's lease holds a
// unit, although the store, which counts leased units as consumed, has
// nothing left; once the lease is spent the store answers, denied.
func TestPeekSeesTheLease(t *testing.T) {
	ctx := context.Background()
	for _, p := range leasedPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			remote := newMemory(clock)
			s := lease.New(remote, lease.WithClock(clock))
			leaseUp(t, s, &p, 2)
			settled(t, s)
			remote.Charge(ctx, sluice.Request{Policy: &p, Key: "k", Cost: p.Capacity()}) // another node's usage
			if peek, _ := remote.Decide(ctx, sluice.Request{Policy: &p, Key: "k"}); peek.Allowed {
				t.Fatalf("the store has something left: %+v", peek)
			}
			held := s.Held(&p, "k")
			peek, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k"})
			if err != nil || !peek.Allowed || peek.Remaining < held {
				t.Fatalf("a peek with %d leased: %+v, %v; want allowed", held, peek, err)
			}
			for range held {
				if d, _ := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}); !d.Allowed {
					t.Fatalf("a leased unit was denied: %+v", d)
				}
			}
			settled(t, s)
			if s.Held(&p, "k") == 0 {
				if peek, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k"}); err != nil || peek.Allowed || peek.RetryAfter <= 0 {
					t.Fatalf("a peek with the lease spent and nothing left: %+v, %v; want denied", peek, err)
				}
			}
		})
	}
}

// TestChargeKeepsCount: on one node within one fixed window, whatever mix
// of decisions and charges it sees, a decision is admitted only while the
// units admitted and charged before it leave room for it: charges spending
// leased units never let a decision through that the store alone would
// have denied.
func TestChargeKeepsCount(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute}
	for seed := range uint64(4) {
		clock := storetest.NewClock(storetest.Epoch)
		remote := newMemory(clock)
		s := lease.New(remote, lease.WithClock(clock))
		rng := rand.New(rand.NewPCG(seed, 5))
		used, admitted, charged := int64(0), 0, 0
		for i := range 400 {
			clock.Advance(time.Duration(rng.IntN(100)) * time.Millisecond) // within the first minute
			if rng.IntN(3) == 0 {
				n := rng.Int64N(6)
				if _, err := s.Charge(ctx, sluice.Request{Policy: &p, Key: "k", Cost: n}); err != nil {
					t.Fatal(err)
				}
				used += n
				charged++
				continue
			}
			res, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				if used+1 > p.Limit {
					t.Fatalf("seed %d step %d: a decision admitted with %d used of %d", seed, i, used, p.Limit)
				}
				used++
				admitted++
			}
		}
		if admitted == 0 || used <= p.Limit {
			t.Fatalf("seed %d: %d admitted, %d used in all: the trace tests nothing", seed, admitted, used)
		}
	}
}

// TestChargeNeedsACharger: a remote store that cannot charge is an error.
func TestChargeNeedsACharger(t *testing.T) {
	s := lease.New(decideOnly{newMemory(storetest.NewClock(storetest.Epoch))})
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}
	if _, err := s.Charge(context.Background(), sluice.Request{Policy: &p, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrNotChargeable) {
		t.Fatalf("Charge: %v, want ErrNotChargeable", err)
	}
}

type decideOnly struct{ sluice.Store }

// TestConformanceUnleased: with leases off, a lease.Store passes every
// request, charges included, to the remote store, and so passes the
// conformance suite as the remote does. (Leased decisions are coarser by
// design: the tests above hold them to their own promises.)
func TestConformanceUnleased(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		m := newMemory(clock)
		return storetest.Harness{Store: lease.New(m, lease.WithClock(clock), lease.WithOff()), TTL: m.TTL}
	})
}
