package engine_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// Four nodes, each its own engine and store stack over one Redis (and over
// a Cluster), share one fair-share policy's limit: the tenants' demand
// reaches every node through the board, and each tenant gets its max-min
// fair share of the one limit, with and without leases. The clock is fake
// and the shares change between steps (run), so the split is the same
// however slowly the machine runs.
func TestFairShareNodes(t *testing.T) {
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3, 0)
	for _, c := range []struct {
		name, url string
		lease     bool
	}{{"redis", srv.URL(), false}, {"redis+lease", srv.URL(), true}, {"cluster", cl.URL(), false}} {
		t.Run(c.name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			prefix := fmt.Sprintf("fairnodes-%s:", c.name)
			var engines []*engine.Engine
			bound := 1.0 // how far the total may exceed the limit: the lease bound with leases
			for i := range 4 {
				rs, err := redisstore.Open(c.url, redisstore.WithClock(clock), redisstore.WithPrefix(prefix), redisstore.WithTimeout(30*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = rs.Close() })
				var st sluice.Store = failover.New(rs, failover.WithMode(failover.FailClosed), failover.WithClock(clock), failover.WithTimeout(30*time.Second))
				if c.lease {
					ls := lease.New(st, lease.WithClock(clock))
					t.Cleanup(func() { _ = ls.Close() })
					bound = ls.Bound(&fairPolicy(true).Policy)
					st = ls
				}
				engines = append(engines, engine.New(storestack.Of(st), newObserver(), nil, engine.WithClock(clock), engine.WithNode(fmt.Sprint("node", i))))
			}
			got := run(t, clock, engines, fairPolicy(true), tenants, 16)
			t.Logf("admitted %v", got)
			for k, want := range map[string]int{"light": 160, "mid": 320, "heavy": 312} {
				if math.Abs(float64(got[k]-want)) > 0.03*float64(want)+2 {
					t.Errorf("%s admitted %d, want %d (all: %v)", k, got[k], want, got)
				}
			}
			if total := got["light"] + got["mid"] + got["heavy"]; float64(total) > 800*bound {
				t.Errorf("admitted %d in 8 s, over the limit of 800 (× the lease bound %.3f)", total, bound)
			}
		})
	}
}
