package lease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

var prefixes atomic.Int64

// openRedis returns a Redis store on srv reading the test's clock, under a
// key prefix of its own.
func openRedis(t *testing.T, srv *redistest.Server, clock sluice.Clock, timeout time.Duration) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(srv.URL(), redisstore.WithClock(clock), redisstore.WithTimeout(timeout),
		redisstore.WithPrefix(fmt.Sprintf("lease%d:", prefixes.Add(1))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestRedis runs the multi-node traces and the failure cases on a real
// redis-server.
func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	t.Run("MultiNode", func(t *testing.T) {
		runMultiNode(t, func(t *testing.T, clock sluice.Clock) sluice.Store { return openRedis(t, srv, clock, 5*time.Second) })
	})
	t.Run("TwoNodes", func(t *testing.T) { testTwoNodes(t, srv) })
	t.Run("StorePaused", func(t *testing.T) { testStorePaused(t, srv) })
	t.Run("StoreDown", func(t *testing.T) { testStoreDown(t, srv) })
	t.Run("ShutdownStorePaused", func(t *testing.T) { testShutdownStorePaused(t, srv) })
}

// testShutdownStorePaused: a release that cannot reach Redis is not lost
// in silence: Shutdown says how many failed, within its context, and the
// lease no longer decides (the units stay consumed: under-admission only).
func testShutdownStorePaused(t *testing.T, srv *redistest.Server) {
	ctx := context.Background()
	p := sluice.Policy{Name: "gc", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Hour}
	clock := storetest.NewClock(storetest.Epoch)
	s := lease.New(openRedis(t, srv, clock, time.Second), lease.WithClock(clock))
	for range 20 {
		if res, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}); err != nil || !res.Allowed {
			t.Fatalf("before the pause: %+v %v", res, err)
		}
	}
	if s.Held(&p, "k") == 0 {
		t.Fatal("no lease held")
	}
	srv.Pause()
	defer srv.Resume()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := s.Shutdown(sctx)
	if err == nil || !strings.Contains(err.Error(), "releases of unused units failed") {
		t.Fatalf("Shutdown with Redis stopped: %v, want the failed releases", err)
	}
	if held := s.Held(&p, "k"); held != 0 {
		t.Errorf("after Shutdown the node still holds %d units", held)
	}
}

// testTwoNodes: two nodes with leases on one real redis-server, on a fake
// clock. On a hot key they never admit more than the bound (Bound: L per
// window for fixed_window, 1 + d/(B·T) of the bucket's guarantee). On many
// keys each asked for more than its limit, every key admits exactly its
// fixed window's limit in every window: keys too cold to lease are decided
// one call each, and the warm ones' leases are spent or given back within
// the window.
func testTwoNodes(t *testing.T, srv *redistest.Server) {
	ctx := context.Background()
	t.Run("HotKey", func(t *testing.T) {
		for _, p := range leasedPolicies() {
			clock := storetest.NewClock(storetest.Epoch)
			c := newCluster(openRedis(t, srv, clock, 5*time.Second), clock, 2)
			c.quiet = func() { waitQuiet(t, c.nodes...) }
			adm := c.trace(t, p, 11, 3000, 2*time.Millisecond)
			got, bound := overshoot(t, p, c.nodes[0].TTL(&p), adm), c.nodes[0].Bound(&p)
			if got > bound {
				t.Errorf("%s: overshoot %.4f > bound %.4f", p.Name, got, bound)
			}
			st := c.stats()
			t.Logf("%-8s %4d units admitted, overshoot %.4f (bound %.4f), %.3f store calls per decision",
				p.Name, units(adm), got, bound, float64(st.StoreCalls)/float64(st.Decisions))
		}
	})
	for _, load := range []struct {
		name    string
		keys    int
		perTTL  int // requests per key and TTL, both nodes together
		windows int
		limit   int64
	}{
		{"ColdKeys", 100, 2, 3, 20},
		{"WarmKeys", 20, 10, 3, 20},
		// 1.2× the limit: a unit a lease holds unused at the window's end
		// is one the key's other node was denied.
		{"NearLimit", 20, 6, 3, 100},
	} {
		t.Run(load.name, func(t *testing.T) {
			p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: load.limit, Period: time.Second}
			clock := storetest.NewClock(storetest.Epoch)
			c := newCluster(openRedis(t, srv, clock, 5*time.Second), clock, 2)
			ttl := c.nodes[0].TTL(&p)
			rng := rand.New(rand.NewPCG(uint64(load.keys), 7))
			step := ttl / time.Duration(load.keys*load.perTTL) // one request per step
			admitted := map[string]map[int64]int64{}           // key → window → units
			for clock.Now().Sub(storetest.Epoch) < time.Duration(load.windows)*p.Period {
				clock.Advance(step)
				key := fmt.Sprint("k", rng.IntN(load.keys))
				res, err := c.nodes[rng.IntN(2)].Decide(ctx, sluice.Request{Policy: &p, Key: key, Cost: 1})
				if err != nil {
					t.Fatal(err)
				}
				waitQuiet(t, c.nodes...)
				if res.Allowed {
					if admitted[key] == nil {
						admitted[key] = map[int64]int64{}
					}
					admitted[key][clock.Now().Sub(storetest.Epoch).Microseconds()/p.Period.Microseconds()]++
				}
			}
			for k := range load.keys {
				key := fmt.Sprint("k", k)
				for w := range int64(load.windows) {
					if got := admitted[key][w]; got != p.Limit {
						t.Errorf("%s admitted %d in window %d, want exactly L = %d", key, got, w, p.Limit)
					}
				}
			}
			st := c.stats()
			t.Logf("%d decisions, %.3f store calls per decision", st.Decisions, float64(st.StoreCalls)/float64(st.Decisions))
		})
	}
}

// testStorePaused: while Redis is stopped (SIGSTOP) the node spends its
// lease, then times out; once Redis resumes it leases again, and the units
// it admitted in all never exceed the fixed window's limit.
func testStorePaused(t *testing.T, srv *redistest.Server) {
	ctx := context.Background()
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Hour}
	clock := storetest.NewClock(storetest.Epoch)
	s := lease.New(openRedis(t, srv, clock, time.Second), lease.WithClock(clock))
	req := sluice.Request{Policy: &p, Key: "k", Cost: 1}
	admitted := int64(0)
	for range 20 {
		if res, err := s.Decide(ctx, req); err != nil || !res.Allowed {
			t.Fatalf("before the pause: %+v %v", res, err)
		}
		admitted++
	}
	held := s.Held(&p, "k")
	srv.Pause()
	for range held {
		if res, err := s.Decide(ctx, req); err != nil || !res.Allowed {
			t.Fatalf("spending the lease while Redis is stopped: %+v %v", res, err)
		}
		admitted++
	}
	_, err := s.Decide(ctx, req)
	srv.Resume()
	if err == nil {
		t.Fatal("the lease is spent and Redis is stopped, yet no error")
	}
	for {
		res, err := s.Decide(ctx, req)
		if err != nil {
			t.Fatalf("after the resume: %v", err)
		}
		if !res.Allowed {
			break
		}
		admitted++
	}
	// The request that timed out may or may not have reached Redis: at most
	// its reservation is stranded.
	if admitted > p.Limit || admitted < p.Limit-s.MaxLease(&p) {
		t.Errorf("admitted %d in one window, want between L − one lease (%d) and L = %d", admitted, p.Limit-s.MaxLease(&p), p.Limit)
	}
}

// testStoreDown: when Redis dies, the node spends what its lease holds, then
// returns the store's error (for a fail policy to take over).
func testStoreDown(t *testing.T, srv *redistest.Server) {
	ctx := context.Background()
	p := sluice.Policy{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
	clock := storetest.NewClock(storetest.Epoch)
	s := lease.New(openRedis(t, srv, clock, 2*time.Second), lease.WithClock(clock))
	req := sluice.Request{Policy: &p, Key: "k", Cost: 1}
	for range 20 {
		if res, err := s.Decide(ctx, req); err != nil || !res.Allowed {
			t.Fatalf("before the failure: %+v %v", res, err)
		}
	}
	srv.Kill()
	defer srv.Restart()
	spendLease(t, s, req)
	if _, err := s.Decide(ctx, req); err == nil {
		t.Fatal("the lease is spent and Redis is down, yet no error")
	}
}

// spendLease decides req until the units its key's lease holds are spent,
// each from the lease: admitted, and not by a fail policy.
func spendLease(t *testing.T, s *lease.Store, req sluice.Request) {
	t.Helper()
	held := s.Held(req.Policy, req.Key)
	if held == 0 {
		t.Fatal("no lease held")
	}
	for i := range held {
		if res, err := s.Decide(context.Background(), req); err != nil || !res.Allowed || res.Degraded {
			t.Fatalf("request %d of the %d leased: %+v %v", i, held, res, err)
		}
	}
}
