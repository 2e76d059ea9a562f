package lease_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// runMultiNode runs randomized traces of 4 and 16 nodes over one remote
// store and checks the observed overshoot against the proven bound.
func runMultiNode(t *testing.T, open func(t *testing.T, clock sluice.Clock) sluice.Store) {
	for _, nodes := range []int{4, 16} {
		for _, p := range leasedPolicies() {
			for seed := range uint64(3) {
				clock := storetest.NewClock(storetest.Epoch)
				c := newCluster(open(t, clock), clock, nodes)
				adm := c.trace(t, p, seed, 4000, 3*time.Millisecond)
				got := overshoot(t, p, c.nodes[0].TTL(&p), adm)
				if bound := c.nodes[0].Bound(&p); got > bound {
					t.Errorf("%d nodes, %s, seed %d: overshoot %.4f > bound %.4f", nodes, p.Name, seed, got, bound)
				}
				if seed == 0 {
					st := c.stats()
					t.Logf("%2d nodes %-8s %4d units admitted, overshoot %.4f (bound %.4f), %.3f store calls per decision",
						nodes, p.Name, units(adm), got, c.nodes[0].Bound(&p), float64(st.StoreCalls)/float64(st.Decisions))
				}
			}
		}
	}
}

func TestMultiNodeMemory(t *testing.T) {
	runMultiNode(t, func(t *testing.T, clock sluice.Clock) sluice.Store { return newMemory(clock) })
}

// TestKilledNode: a node dropped mid-lease without Close strands its lease:
// the others under-admit by at most that much, and never over-admit.
func TestKilledNode(t *testing.T) {
	ctx := context.Background()
	for _, p := range leasedPolicies() {
		clock := storetest.NewClock(storetest.Epoch)
		remote := newMemory(clock)
		dead := lease.New(remote, lease.WithClock(clock))
		// 30 requests or more: until one ends with units left in a lease
		// (one may use a lease up exactly).
		used := int64(0)
		for ; used < 30 || dead.Held(&p, "k") == 0 && used < 40; used++ {
			dead.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1})
		}
		stranded := dead.Held(&p, "k")
		if stranded == 0 || stranded > dead.Stranded(&p) {
			t.Fatalf("%s: the node holds %d, want 1..%d", p.Name, stranded, dead.Stranded(&p))
		}
		// dead is dropped here: no Close.
		alive := lease.New(remote, lease.WithClock(clock))
		var admitted int64
		for range 2 * p.Capacity() { // no time passes: only the bucket's content is left
			res, err := alive.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				admitted++
			}
		}
		if want := p.Capacity() - used - stranded; admitted != want {
			t.Errorf("%s: the surviving node admitted %d, want capacity − %d used − stranded %d = %d", p.Name, admitted, used, stranded, want)
		}
	}
}

// TestConcurrent: goroutines sharing nodes (and the sweep that gives back
// idle leases) never admit more than a fixed window allows.
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 500, Period: time.Second}
	remote := newMemory(clock)
	c := newCluster(remote, clock, 3, lease.WithSweepEvery(time.Millisecond))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := c.nodes[g%len(c.nodes)]
			for i := range 400 {
				key := "hot"
				if i%5 == 0 {
					key = fmt.Sprintf("cold%d", i%7)
				}
				res, err := node.Decide(ctx, sluice.Request{Policy: &p, Key: key, Cost: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed && key == "hot" {
					admitted.Add(1)
				}
				if g == 0 && i%50 == 0 {
					clock.Advance(time.Millisecond) // within one window
				}
			}
		}()
	}
	wg.Wait()
	// Every unit of the window is admitted, leased or still in the store.
	peek, _ := remote.Decide(ctx, sluice.Request{Policy: &p, Key: "hot"})
	var held int64
	for _, n := range c.nodes {
		held += n.Held(&p, "hot")
	}
	if got := admitted.Load(); got+held+peek.Remaining != p.Limit || got > p.Limit {
		t.Errorf("admitted %d, held %d, left in the store %d: want L=%d in all", got, held, peek.Remaining, p.Limit)
	}
}

// TestBucketBoundIsReached: the bucket bound is not only an upper limit but
// what a lease can really add. Node A reserves from a full bucket and spends
// its lease just before the TTL ends, when the bucket has refilled what A
// took; B empties the bucket at the same instant. The instant sees more than B units — more than the policy
// alone admits — but no more than the bound.
func TestBucketBoundIsReached(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 100, Period: time.Second}
	clock := storetest.NewClock(storetest.Epoch)
	remote := newMemory(clock)
	a := lease.New(remote, lease.WithClock(clock), lease.WithMaxLease(5)) // what refills within d
	b := lease.New(remote, lease.WithClock(clock))
	req := sluice.Request{Policy: &p, Key: "k", Cost: 1}
	drain := func(s *lease.Store) (n int64) {
		for {
			res, err := s.Decide(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Allowed {
				return n
			}
			n++
		}
	}
	for range 3 { // A's demand looks high: it leases its maximum
		a.Decide(ctx, req)
	}
	held := a.Held(&p, "k")
	clock.Advance(a.TTL(&p) - time.Microsecond)
	burst := drain(a) + drain(b) // all at one instant
	if got := a.Held(&p, "k"); got != 0 {
		t.Fatalf("A still holds %d", got)
	}
	ratio := float64(burst) / float64(p.Capacity())
	t.Logf("A held %d; one instant admitted %d, %.3f of B (bound %.3f)", held, burst, ratio, a.Bound(&p))
	if ratio <= 1 || ratio > a.Bound(&p) {
		t.Errorf("one instant admitted %d = %.3f × B, want above 1 and at most the bound %.3f", burst, ratio, a.Bound(&p))
	}
}
