package lease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// countingStore counts the calls a lease store makes to its remote store, by
// kind.
type countingStore struct {
	*memory.Store
	decides, reserves, releases atomic.Int64
}

func (c *countingStore) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	c.decides.Add(1)
	return c.Store.Decide(ctx, req)
}

func (c *countingStore) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	c.decides.Add(1)
	return c.Store.DecideAll(ctx, reqs, results)
}

func (c *countingStore) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	c.reserves.Add(1)
	return c.Store.Reserve(ctx, req, upTo)
}

func (c *countingStore) Release(ctx context.Context, req sluice.Request, r sluice.Reservation, unused int64) error {
	c.releases.Add(1)
	return c.Store.Release(ctx, req, r, unused)
}

func (c *countingStore) calls() int64 {
	return c.decides.Load() + c.reserves.Load() + c.releases.Load()
}

// TestColdKeys: keys asking less often than a lease would pay for (here once
// per TTL) are decided by one store call each, with the store's exact
// Results, and nothing is reserved or held.
func TestColdKeys(t *testing.T) {
	ctx := context.Background()
	for _, p := range leasedPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			direct := newMemory(clock)
			remote := &countingStore{Store: newMemory(clock)}
			s := lease.New(remote, lease.WithClock(clock))
			ttl := s.TTL(&p)
			const keys, rounds = 50, 40
			for r := range rounds {
				for k := range keys {
					clock.Advance(ttl / keys)
					req := sluice.Request{Policy: &p, Key: fmt.Sprint("k", k), Cost: int64(1 + (r+k)%3)}
					want, _ := direct.Decide(ctx, req)
					got, err := s.Decide(ctx, req)
					if err != nil || got != want {
						t.Fatalf("round %d key %d: %+v %v, want the store's own %+v", r, k, got, err, want)
					}
				}
			}
			st := s.Stats()
			if st.Direct != keys*rounds || st.StoreCalls != keys*rounds || st.Leases != 0 || st.Held != 0 {
				t.Errorf("%+v: want every decision sent as it came, no lease", st)
			}
			if remote.reserves.Load() != 0 || remote.releases.Load() != 0 || remote.decides.Load() != keys*rounds {
				t.Errorf("the store saw %d decisions, %d reservations, %d releases; want %d decisions only",
					remote.decides.Load(), remote.reserves.Load(), remote.releases.Load(), keys*rounds)
			}
		})
	}
}

// TestCallsNeverExceedDecisions: on any mix of keys — hot, warm, cold, and
// keys whose rate changes — a node's leases never cost more store calls than
// they save: a node makes no more calls than it decides, with or without
// renewals, far from the limits and at them.
func TestCallsNeverExceedDecisions(t *testing.T) {
	ctx := context.Background()
	for _, limit := range []int64{40, 1_000_000} {
		for _, p := range leasedPolicies() {
			p.Limit, p.Burst = limit, min(p.Burst, limit)
			for _, latency := range []time.Duration{0, 2 * time.Millisecond} {
				name := fmt.Sprintf("%s/limit=%d/latency=%v", p.Name, limit, latency)
				t.Run(name, func(t *testing.T) {
					clock := storetest.NewClock(storetest.Epoch)
					mem := newMemory(clock)
					remote := &countingStore{Store: mem}
					var rs sluice.Store = remote
					if latency > 0 { // reservations take time: leases are renewed ahead
						rs = &countingSlow{countingStore: remote, clock: clock, latency: latency}
					}
					nodes := []*lease.Store{lease.New(rs, lease.WithClock(clock)), lease.New(rs, lease.WithClock(clock))}
					rng := rand.New(rand.NewPCG(uint64(limit), uint64(latency)))
					ttl := nodes[0].TTL(&p)
					decisions := 0
					for phase := range 3 {
						// Each phase gives every key a rate of its own, from
						// a few times per TTL to hundreds.
						rates := make([]int, 20)
						for k := range rates {
							rates[k] = rng.IntN(1 << rng.IntN(9))
						}
						for range 1000 {
							clock.Advance(ttl / 200)
							for k, r := range rates {
								if rng.IntN(200) >= r {
									continue
								}
								req := sluice.Request{Policy: &p, Key: fmt.Sprint("k", k), Cost: int64(1 + rng.IntN(2))}
								if _, err := nodes[(k+phase)%2].Decide(ctx, req); err != nil {
									t.Fatal(err)
								}
								decisions++
								if latency > 0 {
									waitQuiet(t, nodes...)
								}
							}
						}
					}
					waitQuiet(t, nodes...)
					calls := remote.calls()
					t.Logf("%d decisions, %d store calls (%d decisions, %d reservations, %d releases)",
						decisions, calls, remote.decides.Load(), remote.reserves.Load(), remote.releases.Load())
					if calls > int64(decisions) {
						t.Errorf("%d store calls for %d decisions: leases cost more than they saved", calls, decisions)
					}
				})
			}
		}
	}
}

// countingSlow is countingStore whose reservations take latency by the fake
// clock, as slowStore's.
type countingSlow struct {
	*countingStore
	clock   *storetest.Clock
	latency time.Duration
}

func (s *countingSlow) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	r, err := s.countingStore.Reserve(ctx, req, upTo)
	s.clock.Advance(s.latency)
	return r, err
}

// TestCoolingKey: a key that cools down stops being leased: no renewal, its
// decisions go to the store one call each, and its lease is forgotten.
func TestCoolingKey(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 100_000, Period: time.Second}
	remote := &countingStore{Store: newMemory(clock)}
	s := lease.New(remote, lease.WithClock(clock), lease.WithSweepEvery(time.Millisecond))
	ttl := s.TTL(&p)
	req := sluice.Request{Policy: &p, Key: "k", Cost: 1}
	for range 2000 { // hot: 100 per TTL
		clock.Advance(ttl / 100)
		if _, err := s.Decide(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.StoreCalls > 40 || st.Leases != 1 {
		t.Fatalf("hot: %+v, want a lease and few calls", st)
	}
	before, reserves := s.Stats(), remote.reserves.Load()
	for range 200 { // cold: one request per TTL
		clock.Advance(ttl)
		if _, err := s.Decide(ctx, req); err != nil {
			t.Fatal(err)
		}
		s.Decide(ctx, sluice.Request{Policy: &p, Key: "other", Cost: 1}) // keeps sweeping
	}
	st := s.Stats()
	if st.Direct-before.Direct < 390 {
		t.Errorf("cold: %d of 400 decisions sent as they came", st.Direct-before.Direct)
	}
	if got := remote.reserves.Load() - reserves; got > 2 {
		t.Errorf("cold: %d reservations", got)
	}
	if st.Leases != 0 || st.Held != 0 {
		t.Errorf("cold: %d leases holding %d units, want the key forgotten", st.Leases, st.Held)
	}
}
