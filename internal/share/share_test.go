package share

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

var fair = sluice.Policy{Name: "fair", Algorithm: sluice.GCRA, Limit: 300, Period: time.Second}

// node is one node's Sharer on a shared board, under a test clock.
type node struct {
	s     *Sharer
	clock *storetest.Clock
}

// ask counts n requests of tenant (weight w) and returns the last limit.
func (n node) ask(p *sluice.Policy, tenant string, count int, w float64) *sluice.Policy {
	var l *sluice.Policy
	for range count {
		l = n.s.Limit(p, time.Second, tenant, 1, w)
	}
	return l
}

// tick moves the clock past the interval and waits for the recomputation a
// request then starts.
func (n node) tick(t *testing.T, p *sluice.Policy) {
	t.Helper()
	n.clock.Advance(time.Second)
	n.recompute(p)
}

// recompute runs the recomputation that is due.
func (n node) recompute(p *sluice.Policy) {
	n.s.Limit(p, time.Second, "_ticker", 0, 1) // p's pool, should it be new
	n.s.Recompute()
}

func rateOf(p *sluice.Policy) float64 {
	return float64(p.Limit) * float64(time.Second) / float64(p.Period)
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*max(1, math.Abs(b)) }

func wantShares(t *testing.T, s *Sharer, policy string, want map[string]float64, newcomer float64) {
	t.Helper()
	got, nc := s.Shares(policy)
	delete(got, "_ticker")
	if len(got) != len(want) || !near(nc, newcomer) {
		t.Fatalf("shares %v, newcomer %v; want %v, newcomer %v", got, nc, want, newcomer)
	}
	for k, w := range want {
		if !near(got[k], w) {
			t.Fatalf("shares %v, newcomer %v; want %v, newcomer %v", got, nc, want, newcomer)
		}
	}
}

// oneNode is a node alone on its board, and the policy fair.
func oneNode() (node, sluice.Policy) {
	clock := storetest.NewClock(storetest.Epoch)
	return newNode(memory.New(memory.WithClock(clock)), clock, "n"), fair
}

func newNode(board sluice.DemandBoard, clock *storetest.Clock, id string) node {
	return node{s: New(board, WithClock(clock), WithNode(id)), clock: clock}
}

// Across two nodes sharing a board, each tenant's demand is summed and the
// limit divided by max-min fairness: the light ones are limited to the
// level (what they may grow to), the heavy one to what the others leave.
func TestTwoNodes(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	board := memory.New(memory.WithClock(clock))
	n1, n2 := newNode(board, clock, "n1"), newNode(board, clock, "n2")
	p := fair
	if l := n1.ask(&p, "a", 50, 1); rateOf(l) != 300 {
		t.Fatalf("before any share is known, a newcomer's limit is %v/s, want the whole 300", rateOf(l))
	}
	n1.ask(&p, "heavy", 500, 1)
	n2.ask(&p, "b", 50, 1)
	n2.ask(&p, "heavy", 500, 1)
	clock.Advance(time.Second)
	n1.recompute(&p) // n1 posts, reads only its own
	n2.recompute(&p) // n2 posts and reads both
	wantShares(t, n2.s, "fair", map[string]float64{"a": 200, "b": 200, "heavy": 197}, 200)
	if l := n2.s.Limit(&p, time.Second, "heavy", 1, 1); l.Limit != 197 || l.Period != time.Second || l.Name != "fair" || l.Algorithm != sluice.GCRA {
		t.Fatalf("heavy's limit %+v, want 197 per second", l)
	}
}

// A light tenant's limit is what it may grow to: the level; with weights
// the unsatisfied tenants split what is left in proportion to them.
func TestWeights(t *testing.T) {
	n, p := oneNode()
	n.ask(&p, "gold", 1000, 3)
	n.ask(&p, "free", 1000, 1)
	n.ask(&p, "light", 20, 1)
	n.tick(t, &p)
	// 280 left after light's 20: gold 3/4, free 1/4; the level is 70. The
	// headroom, 1% of 300, comes off gold and free by what they ask over
	// their shares: 790 and 930.
	gold, free := 210-3*790.0/1720, 70-3*930.0/1720
	wantShares(t, n.s, "fair", map[string]float64{"gold": gold, "free": free, "light": 70}, 70)
}

// Below the limit every tenant gets its demand and the spare capacity is
// shared by weight, so the limits sum to the policy's.
func TestSpare(t *testing.T) {
	n, p := oneNode()
	n.ask(&p, "a", 10, 1)
	n.ask(&p, "b", 90, 1)
	n.tick(t, &p)
	wantShares(t, n.s, "fair", map[string]float64{"a": 110, "b": 190}, 100)
}

// Demand is measured over the last two periods: a tenant idle for that
// long is no claimant (a newcomer again), and its node forgets it after
// posting its 0.
func TestIdle(t *testing.T) {
	n, p := oneNode()
	n.ask(&p, "a", 1000, 1)
	n.ask(&p, "b", 1000, 1)
	n.tick(t, &p)
	wantShares(t, n.s, "fair", map[string]float64{"a": 148.5, "b": 148.5}, 150)
	n.ask(&p, "a", 1000, 1)
	n.tick(t, &p) // b asked 500 a period over the last two
	wantShares(t, n.s, "fair", map[string]float64{"a": 150 - 3*850.0/1200, "b": 150 - 3*350.0/1200}, 150)
	n.ask(&p, "a", 1000, 1)
	n.tick(t, &p)
	wantShares(t, n.s, "fair", map[string]float64{"a": 297}, 300)
	pl := (*n.s.pools.Load())["fair"]
	if _, ok := pl.counts.Load("b"); !ok {
		t.Fatal("b was forgotten before its 0 was posted")
	}
	n.ask(&p, "a", 1000, 1)
	n.tick(t, &p)
	if _, ok := pl.counts.Load("b"); ok {
		t.Fatal("b, idle for two periods, is still counted")
	}
}

// failing is a board that fails while down is set.
type failing struct {
	sluice.DemandBoard
	down atomic.Bool
}

var errDown = errors.New("down")

func (f *failing) ReadDemand(ctx context.Context, board string) ([]sluice.Demand, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.DemandBoard.ReadDemand(ctx, board)
}

// While the board cannot be read, the shares in force stay, and the failure
// is reported.
func TestBoardDown(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	f := &failing{DemandBoard: memory.New(memory.WithClock(clock))}
	var failures atomic.Int64
	n := node{s: New(f, WithClock(clock), WithErrorHandler(func(err error) {
		if errors.Is(err, errDown) {
			failures.Add(1)
		}
	})), clock: clock}
	p := fair
	n.ask(&p, "a", 1000, 1)
	n.ask(&p, "b", 1000, 1)
	n.tick(t, &p)
	f.down.Store(true)
	n.ask(&p, "a", 1000, 1)
	n.tick(t, &p)
	wantShares(t, n.s, "fair", map[string]float64{"a": 148.5, "b": 148.5}, 150)
	if failures.Load() != 1 {
		t.Fatalf("%d failures reported, want 1", failures.Load())
	}
}

// A limit says its rate exactly: whole units over a stretched period; a
// cost above its capacity gets one holding it at the same rate.
func TestEntry(t *testing.T) {
	for _, c := range []struct {
		p    sluice.Policy
		rate float64
	}{
		{fair, 60.5}, {fair, 0.5}, {fair, 300}, {fair, 1e-12},
		{sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 100, Period: time.Minute, Burst: 400}, 12.25},
		{sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second}, 2.5},
	} {
		e := newEntry(&c.p, c.rate)
		if err := e.policy.Validate(); err != nil {
			t.Fatalf("rate %v of %+v: %v", c.rate, c.p, err)
		}
		want := max(c.rate, 1e-6) * float64(time.Second) / float64(c.p.Period)
		if c.p.Algorithm == sluice.FixedWindow && c.rate >= 1 {
			want = math.Floor(c.rate) * float64(time.Second) / float64(c.p.Period) // whole units per window
		}
		if got := rateOf(&e.policy); math.Abs(got-want) > want*1e-5 && e.policy != c.p {
			t.Errorf("rate %v of %+v: %+v admits %v/s, want %v", c.rate, c.p, e.policy, got, want)
		}
		if c.p.Burst > 0 && e.policy.Burst != int64(float64(c.p.Burst)*c.rate/float64(c.p.Limit)) {
			t.Errorf("rate %v of %+v: burst %d, want it scaled", c.rate, c.p, e.policy.Burst)
		}
		big := e.limit(c.p.Capacity())
		if big.Capacity() < c.p.Capacity() || math.Abs(rateOf(big)-rateOf(&e.policy)) > rateOf(&e.policy)*1e-3 {
			t.Errorf("rate %v of %+v: for a cost of %d, %+v", c.rate, c.p, c.p.Capacity(), big)
		}
	}
}

func TestMember(t *testing.T) {
	for _, tenant := range []string{"a", "with space", " ", "x y z", ""} {
		w, got, ok := parseMember(member("node", 2.5, tenant))
		if !ok || got != tenant || w != 2.5 {
			t.Errorf("member of %q: %v %q %v", tenant, w, got, ok)
		}
	}
	if _, _, ok := parseMember("garbage"); ok {
		t.Error("garbage parsed")
	}
}
