package failover_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// halfDown is a memory store spread over two nodes by the key's first
// letter ("a…" on node 0, "b…" on node 1) whose node 1 is down: every call
// touching a key there fails with an error naming node 1.
type halfDown struct{ *memory.Store }

type nodeErr string

func (e nodeErr) Error() string      { return "node " + string(e) + " down" }
func (e nodeErr) FailedNode() string { return string(e) }

func nodeOf(r sluice.Request) string {
	if strings.HasPrefix(r.Key, "b") {
		return "b"
	}
	return "a"
}

func (h halfDown) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	if nodeOf(req) == "b" {
		return sluice.Result{}, nodeErr("b")
	}
	return h.Store.Decide(ctx, req)
}

func (h halfDown) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	for _, r := range reqs {
		if nodeOf(r) == "b" {
			return nodeErr("b")
		}
	}
	return h.Store.DecideAll(ctx, reqs, results)
}

// TestBreakerPerNode: failures of node b — alone, or in sets spanning both
// nodes, blamed on node b by the error — open b's breaker and leave a's
// closed, so a's keys keep being decided by the primary.
func TestBreakerPerNode(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	var changes []string
	s := failover.New(halfDown{memory.New(memory.WithClock(clock))},
		failover.WithMode(failover.FailOpen), failover.WithClock(clock),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 3}),
		failover.WithBreakerPerNode(nodeOf),
		failover.WithNodeStateChange(func(node string, from, to failover.BreakerState) {
			changes = append(changes, node+":"+to.String())
		}))
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
	if fmt.Sprint(changes) != "[b:open]" {
		t.Errorf("transitions %v, want [b:open]", changes)
	}
	r, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "b2", Cost: 1})
	if err != nil || !r.Degraded {
		t.Errorf("dead node's key: %+v, %v; want degraded", r, err)
	}
}

// moving is a memory store whose keys all live on one node, named by home,
// which fails while down is set: a Cluster whose master dies and whose
// replica, under another name, takes its slots over.
type moving struct {
	*memory.Store
	home atomic.Value // string
	down atomic.Bool
}

func (m *moving) node(sluice.Request) string { return m.home.Load().(string) }

func (m *moving) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	if m.down.Load() {
		return sluice.Result{}, nodeErr(m.node(req))
	}
	return m.Store.Decide(ctx, req)
}

// TestBreakerPerNodeMoves: when the keys of a failed node move to a new one,
// the new node's breaker is fresh (its decisions are the primary's at once),
// and the old node's open breaker stops counting in State, OpenNodes and the
// retry hint once no request has named it for the breaker's window.
func TestBreakerPerNodeMoves(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	m := &moving{Store: memory.New(memory.WithClock(clock))}
	m.home.Store("master1")
	s := failover.New(m, failover.WithMode(failover.FailOpen), failover.WithClock(clock),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 3, Window: 10 * time.Second, Cooldown: time.Minute}),
		failover.WithBreakerPerNode(m.node))
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}
	m.down.Store(true)
	for range 5 {
		if r, err := s.Decide(ctx, req); err != nil || !r.Degraded {
			t.Fatalf("dead node: %+v, %v; want degraded", r, err)
		}
	}
	if s.State() != failover.BreakerOpen || s.OpenNodes() != 1 {
		t.Fatalf("after the failures: state %v, %d open; want open, 1", s.State(), s.OpenNodes())
	}
	m.home.Store("replica1")
	m.down.Store(false)
	if r, err := s.Decide(ctx, req); err != nil || r.Degraded {
		t.Fatalf("after the keys moved to a fresh node: %+v, %v; want the primary's", r, err)
	}
	clock.Advance(9 * time.Second)
	if s.State() != failover.BreakerOpen {
		t.Errorf("within the window the dead node still counts: state %v, want open", s.State())
	}
	clock.Advance(2 * time.Second)
	if s.State() != failover.BreakerClosed || s.OpenNodes() != 0 {
		t.Errorf("a window after the dead node was last named: state %v, %d open; want closed, 0", s.State(), s.OpenNodes())
	}
	// The old node named again counts again.
	m.home.Store("master1")
	if r, err := s.Decide(ctx, req); err != nil || !r.Degraded {
		t.Fatalf("the old node's open breaker: %+v, %v; want degraded", r, err)
	}
	if s.State() != failover.BreakerOpen {
		t.Errorf("the old node named again: state %v, want open", s.State())
	}
}

// TestBreakerPerNodeBounded: more nodes than MaxNodeBreakers neither grow
// the breakers without bound nor fail calls; an open breaker survives.
func TestBreakerPerNodeBounded(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	var n atomic.Int64
	s := failover.New(halfDown{memory.New(memory.WithClock(clock))}, failover.WithMode(failover.FailOpen),
		failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 3}),
		failover.WithBreakerPerNode(func(r sluice.Request) string {
			if r.Key == "b" {
				return "b"
			}
			return fmt.Sprint("n", n.Add(1))
		}))
	for range 5 {
		if r, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "b", Cost: 1}); err != nil || !r.Degraded {
			t.Fatalf("dead node: %+v, %v", r, err)
		}
	}
	for i := range 3 * failover.MaxNodeBreakers {
		if r, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: fmt.Sprint("a", i), Cost: 1}); err != nil || r.Degraded {
			t.Fatalf("decision %d on a new node: %+v, %v", i, r, err)
		}
	}
	if s.State() != failover.BreakerOpen || s.OpenNodes() != 1 {
		t.Errorf("state %v with %d open after %d nodes; want the dead node's breaker open", s.State(), s.OpenNodes(), 3*failover.MaxNodeBreakers)
	}
}
