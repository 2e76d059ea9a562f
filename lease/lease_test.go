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

func newMemory(clock sluice.Clock) *memory.Store { return memory.New(memory.WithClock(clock)) }

// TestBound: the defaults buy a bound of at most 1.05 for every algorithm.
func TestBound(t *testing.T) {
	s := lease.New(memory.New())
	for _, a := range sluice.Algorithms {
		p := sluice.Policy{Name: "p", Algorithm: a, Limit: 100, Period: time.Second}
		want := 1.0
		if a == sluice.TokenBucket || a == sluice.GCRA {
			want = 1.05
		}
		if got := s.Bound(&p); got != want {
			t.Errorf("%s: Bound = %v, want %v", a, got, want)
		}
	}
	small := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 100, Period: time.Second, Burst: 10}
	if got := s.TTL(&small); got != 5*time.Millisecond { // B·T = 100ms
		t.Errorf("TTL of B=10: %v, want 5ms", got)
	}
	long := lease.New(memory.New(), lease.WithTTL(100*time.Millisecond))
	if got := long.Bound(&small); got != 2 {
		t.Errorf("TTL 100ms over B·T = 100ms: Bound = %v, want 2", got)
	}
}

// TestSingleNode: one node alone never admits more than the bound, whatever
// the algorithm (the unleased ones keep their own guarantee), and calls the
// store far less often than it decides.
func TestSingleNode(t *testing.T) {
	for _, p := range leasedPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			c := newCluster(newMemory(clock), clock, 1)
			adm := c.trace(t, p, 1, 3000, 2*time.Millisecond)
			got := overshoot(t, p, c.nodes[0].TTL(&p), adm)
			bound := c.nodes[0].Bound(&p)
			if got > bound {
				t.Errorf("overshoot %.4f > bound %.4f", got, bound)
			}
			st := c.stats()
			t.Logf("%d units admitted, overshoot %.4f (bound %.4f), %d store calls for %d decisions", units(adm), got, bound, st.StoreCalls, st.Decisions)
			if st.StoreCalls*4 > st.Decisions {
				t.Errorf("%d store calls for %d decisions", st.StoreCalls, st.Decisions)
			}
		})
	}
}

// TestUnleasedPassThrough: algorithms that are not leased are decided by the
// remote store, one call each, with its exact Results.
func TestUnleasedPassThrough(t *testing.T) {
	ctx := context.Background()
	for _, a := range []sluice.Algorithm{sluice.SlidingWindow, sluice.SlidingLog, sluice.LeakyBucket} {
		clock := storetest.NewClock(storetest.Epoch)
		direct, remote := newMemory(clock), newMemory(clock)
		s := lease.New(remote, lease.WithClock(clock))
		p := sluice.Policy{Name: "p", Algorithm: a, Limit: 5, Period: time.Second}
		for i := range 12 {
			clock.Advance(37 * time.Millisecond)
			req := sluice.Request{Policy: &p, Key: "k", Cost: int64(i%2 + 1)}
			want, _ := direct.Decide(ctx, req)
			got, err := s.Decide(ctx, req)
			if err != nil || got != want {
				t.Fatalf("%s step %d: %+v %v, want %+v", a, i, got, err, want)
			}
		}
		if st := s.Stats(); st.StoreCalls != st.Decisions {
			t.Errorf("%s: %d store calls for %d decisions", a, st.StoreCalls, st.Decisions)
		}
	}
}

// TestCloseGivesBack: Close returns the unused units, so the store sees only
// what was admitted.
func TestCloseGivesBack(t *testing.T) {
	ctx := context.Background()
	for _, p := range leasedPolicies() {
		clock := storetest.NewClock(storetest.Epoch)
		remote := newMemory(clock)
		s := lease.New(remote, lease.WithClock(clock))
		// 40 requests or more: until one ends with units left in a lease
		// (one may use a lease up exactly).
		used := int64(0)
		for ; used < 40 || s.Held(&p, "k") == 0 && used < 45; used++ {
			if res, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}); err != nil || !res.Allowed {
				t.Fatalf("%s: %+v %v", p.Name, res, err)
			}
		}
		if s.Held(&p, "k") == 0 {
			t.Fatalf("%s: the node holds no lease after 40 requests", p.Name)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s: Close: %v", p.Name, err)
		}
		peek, _ := remote.Decide(ctx, sluice.Request{Policy: &p, Key: "k"})
		if peek.Remaining != p.Capacity()-used {
			t.Errorf("%s: after Close the store has %d left, want %d", p.Name, peek.Remaining, p.Capacity()-used)
		}
	}
}

// TestDecideAll: a batch is all or nothing, and nothing leaks when denied.
func TestDecideAll(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	remote := newMemory(clock)
	s := lease.New(remote, lease.WithClock(clock))
	user := sluice.Policy{Name: "user", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Second}
	global := sluice.Policy{Name: "global", Algorithm: sluice.TokenBucket, Limit: 100, Period: time.Second}
	reqs := []sluice.Request{{Policy: &user, Key: "u", Cost: 1}, {Policy: &global, Key: "g", Cost: 1}}
	res := make([]sluice.Result, 2)
	for i := range 5 {
		if err := s.DecideAll(ctx, reqs, res); err != nil {
			t.Fatal(err)
		}
		if want := i < 3; res[0].Allowed != want || res[1].Allowed != want {
			t.Fatalf("batch %d: %+v, want allowed %v", i, res, want)
		}
	}
	peek, _ := remote.Decide(ctx, sluice.Request{Policy: &global, Key: "g"})
	if peek.Remaining != 97 {
		t.Errorf("global has %d left after 3 admitted batches, want 97", peek.Remaining)
	}
	// A single request goes through the lease.
	if err := s.DecideAll(ctx, reqs[1:], res[:1]); err != nil || !res[0].Allowed {
		t.Fatalf("single: %+v %v", res[0], err)
	}
}

// TestFixedWindowLeaseEndsWithWindow: a lease reserved late in a window is
// not spent in the next one.
func TestFixedWindowLeaseEndsWithWindow(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	remote := newMemory(clock)
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Second}
	s := lease.New(remote, lease.WithClock(clock), lease.WithTTL(10*time.Second))
	clock.Advance(999 * time.Millisecond)
	for range 20 { // at one instant: the key's demand looks high
		s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1})
	}
	if s.Held(&p, "k") == 0 {
		t.Fatal("no lease held")
	}
	clock.Advance(time.Millisecond) // the next window
	if got := s.Held(&p, "k"); got != 0 {
		t.Fatalf("the lease outlived its window: %d held", got)
	}
	if _, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	peek, _ := remote.Decide(ctx, sluice.Request{Policy: &p, Key: "k"})
	if held := s.Held(&p, "k"); peek.Remaining+held != 999 {
		t.Errorf("the new window has %d left and %d leased after one request, want 999 in all", peek.Remaining, held)
	}
}
