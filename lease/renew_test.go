package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// slowStore is a memory store whose reservations take latency by the fake
// clock: the clock moves on after the store has answered, as it would while
// the answer travels back. Renewals start that far ahead.
type slowStore struct {
	*memory.Store
	clock   *storetest.Clock
	latency time.Duration
}

func (s *slowStore) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	r, err := s.Store.Reserve(ctx, req, upTo)
	s.clock.Advance(s.latency)
	return r, err
}

// waitQuiet waits (in real time, generously) until no store call is in
// flight in the background on any of nodes.
func waitQuiet(t *testing.T, nodes ...*lease.Store) {
	t.Helper()
	for _, n := range nodes {
		testwait.Until(t, "no background store call in flight", func() bool { return n.Stats().Background == 0 })
	}
}

// TestRenewalAhead: on a key below its limit, a node's decisions after the
// first three never wait for the store: every later store call is made in the
// background, and every decision admits.
func TestRenewalAhead(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	remote := &slowStore{Store: newMemory(clock), clock: clock, latency: 2 * time.Millisecond}
	s := lease.New(remote, lease.WithClock(clock))
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Second}
	ctx := context.Background()
	const decisions = 2000
	for i := range decisions {
		res, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1})
		if err != nil || !res.Allowed {
			t.Fatalf("decision %d at half the limit: %+v, %v", i, res, err)
		}
		waitQuiet(t, s)
		clock.Advance(2 * time.Millisecond)
	}
	st := s.Stats()
	t.Logf("%d decisions, %d store calls, %d renewals, %d waited", st.Decisions, st.StoreCalls, st.Renewals, st.Waited)
	if st.Waited != 3 {
		t.Errorf("%d decisions waited for the store, want only the first three (two sent as they came while the key was too cold to lease, then its first lease)", st.Waited)
	}
	if st.Renewals < decisions/50 {
		t.Errorf("%d renewals for %d decisions of 50ms leases", st.Renewals, decisions)
	}
	if held := s.Held(&p, "k"); held > s.Stranded(&p) {
		t.Errorf("holds %d units, more than a lease (%d)", held, s.Stranded(&p))
	}
}

// TestRenewalBound: with renewals, several nodes on random traces still
// admit no more than the bound, and a closed node gives back its renewal.
func TestRenewalBound(t *testing.T) {
	for _, p := range leasedPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			mem := newMemory(clock)
			c := newCluster(&slowStore{Store: mem, clock: clock, latency: 3 * time.Millisecond}, clock, 3)
			c.quiet = func() { waitQuiet(t, c.nodes...) }
			adm := c.trace(t, p, 7, 3000, 2*time.Millisecond)
			got := overshoot(t, p, c.nodes[0].TTL(&p), adm)
			if bound := c.nodes[0].Bound(&p); got > bound {
				t.Errorf("overshoot %.4f > bound %.4f", got, bound)
			}
			st := c.stats()
			t.Logf("%d units admitted, overshoot %.4f, %d store calls (%d renewals) for %d decisions", units(adm), got, st.StoreCalls, st.Renewals, st.Decisions)
			if st.Renewals == 0 {
				t.Error("no renewal")
			}
			for _, n := range c.nodes {
				if err := n.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if held := n.Stats().Held; held != 0 {
					t.Errorf("a closed node holds %d units", held)
				}
			}
			if p.Algorithm == sluice.FixedWindow {
				return
			}
			// Everything given back: after a full refill the bucket admits its burst.
			clock.Advance(time.Duration(p.Capacity()) * p.EmissionInterval())
			r, err := mem.Decide(context.Background(), sluice.Request{Policy: &p, Key: "hot", Cost: p.Capacity()})
			if err != nil || !r.Allowed {
				t.Errorf("burst after close and refill: %+v, %v", r, err)
			}
		})
	}
}
