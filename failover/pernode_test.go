package failover_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// halfDown is a memory store spread over two nodes by the key's first
// letter ("a…" on node 0, "b…" on node 1) whose node 1 is down: every call
// touching a key there fails with an error naming node 1.
type halfDown struct{ *memory.Store }

type nodeErr int

func (e nodeErr) Error() string   { return "node down" }
func (e nodeErr) FailedNode() int { return int(e) }

func nodeOf(r sluice.Request) int {
	if strings.HasPrefix(r.Key, "b") {
		return 1
	}
	return 0
}

func (h halfDown) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	if nodeOf(req) == 1 {
		return sluice.Result{}, nodeErr(1)
	}
	return h.Store.Decide(ctx, req)
}

func (h halfDown) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	for _, r := range reqs {
		if nodeOf(r) == 1 {
			return nodeErr(1)
		}
	}
	return h.Store.DecideAll(ctx, reqs, results)
}

// TestBreakerPerNode: failures of node 1 — alone, or in sets spanning both
// nodes, blamed on node 1 by the error — open node 1's breaker and leave
// node 0's closed, so node 0's keys keep being decided by the primary.
func TestBreakerPerNode(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := failover.New(halfDown{memory.New(memory.WithClock(clock))},
		failover.WithMode(failover.FailOpen), failover.WithClock(clock),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 3}),
		failover.WithBreakerPerNode(2, nodeOf))
	spread := []sluice.Request{{Policy: policy, Key: "a1", Cost: 1}, {Policy: policy, Key: "b1", Cost: 1}}
	for i := range 10 {
		res := make([]sluice.Result, 2)
		if err := s.DecideAll(ctx, spread, res); err != nil || !res[0].Degraded || !res[1].Degraded {
			t.Fatalf("set %d over a dead node: %+v, %v; want both degraded", i, res, err)
		}
		r, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "a2", Cost: 1})
		if err != nil || r.Degraded {
			t.Fatalf("decision %d on the healthy node: %+v, %v", i, r, err)
		}
	}
	if s.State() != failover.BreakerOpen || s.OpenNodes() != 1 {
		t.Errorf("state %v with %d nodes' breakers not closed; want open, 1", s.State(), s.OpenNodes())
	}
	r, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "b2", Cost: 1})
	if err != nil || !r.Degraded {
		t.Errorf("dead node's key: %+v, %v; want degraded", r, err)
	}
	// A node out of range is treated as node 0 rather than panicking.
	odd := failover.New(memory.New(), failover.WithBreakerPerNode(2, func(sluice.Request) int { return 7 }))
	if _, err := odd.Decide(ctx, sluice.Request{Policy: policy, Key: "x", Cost: 1}); err != nil {
		t.Error(err)
	}
}
