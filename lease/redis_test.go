package lease_test

import (
	"context"
	"fmt"
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
