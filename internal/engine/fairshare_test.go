package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func fairPolicy(share bool) *config.Policy {
	p := &config.Policy{Policy: sluice.Policy{Name: "fair", Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}}
	if share {
		p.FairShare, p.ShareInterval = true, time.Second
	}
	return p
}

// tenant offers rate requests per second to a policy.
type tenant struct {
	key  string
	rate int // per second, a multiple of 10
	node int // the engine it asks, -1: every engine in turn
}

// run offers each tenant's rate to p, in 10ms steps from the heaviest to the
// lightest, on its engine or the engines in turn, for secs seconds, and returns what each
// tenant was admitted in the last half.
func run(t *testing.T, clock *storetest.Clock, engines []*engine.Engine, p *config.Policy, tenants []tenant, secs int) map[string]int {
	t.Helper()
	admitted := map[string]int{}
	ctx := context.Background()
	steps := secs * 100
	for step := range steps {
		for _, tn := range tenants {
			// rate/100 requests a step, spread: rate 20 is one every 5th step.
			n := tn.rate / 100
			if every := 100 / max(tn.rate%100, 1); tn.rate%100 != 0 && step%every == 0 {
				n++
			}
			for k := range n {
				e := engines[(step+k)%len(engines)]
				if tn.node >= 0 {
					e = engines[tn.node%len(engines)]
				}
				res := make([]sluice.Result, 1)
				key := tn.key
				if !p.FairShare {
					key = "all" // one global limit
				}
				ok, err := e.Decide(ctx, []engine.Check{{Policy: p, Key: key, Cost: 1}}, res)
				if err != nil {
					t.Fatal(err)
				}
				if ok && step >= steps/2 {
					admitted[tn.key]++
				}
			}
		}
		// The shares change before the next step's decisions, every
		// engine's in turn, as the clock says, not whenever a background
		// recomputation gets to run on a busy machine.
		clock.Advance(10 * time.Millisecond)
		for _, e := range engines {
			e.Shares().Recompute()
		}
	}
	return admitted
}

// tenants: the heavy one on every node, the others each on a node of its
// own, so that only the board tells a node of the others.
var tenants = []tenant{{"heavy", 1000, -1}, {"mid", 50, 1}, {"light", 20, 2}}

// A fair-share policy gives each tenant its max-min fair share of the limit
// while their demand exceeds it: light and mid all they ask, heavy the
// rest; the same policy without share: fair serves whoever asks first, the
// heavy tenant.
func TestFairShare(t *testing.T) {
	for _, share := range []bool{true, false} {
		clock := storetest.NewClock(storetest.Epoch)
		st := memory.New(memory.WithClock(clock))
		obs := newObserver()
		e := engine.New(storestack.Of(st), obs, nil, engine.WithClock(clock))
		got := run(t, clock, []*engine.Engine{e}, fairPolicy(share), tenants, 16)
		t.Logf("share %v: admitted %v", share, got)
		// Over the last 8 s, of 800: light all its 160, mid and heavy, both
		// asking more than the 320 left each, 320 — but heavy, asking far
		// more, gives up the headroom (1% of the limit).
		if !share {
			if got["light"] > 16 || got["heavy"] < 720 {
				t.Fatalf("without share: %v, want heavy to take nearly all", got)
			}
			continue
		}
		for k, want := range map[string]int{"light": 160, "mid": 320, "heavy": 312} {
			if math.Abs(float64(got[k]-want)) > 0.03*float64(want)+2 {
				t.Errorf("fair share: %s admitted %d, want %d (all: %v)", k, got[k], want, got)
			}
		}
	}
}

// A key's plan weighs it: a tenant on a plan of twice the policy's rate gets
// twice an equal tenant's share.
func TestFairShareWeights(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	e := engine.New(storestack.Of(memory.New(memory.WithClock(clock))), newObserver(), nil, engine.WithClock(clock))
	p := fairPolicy(true)
	p.Plans = &config.Plans{Limits: map[string]config.PlanLimit{"gold": {Limit: 200, Period: time.Second}}}
	admitted := map[string]int{}
	ctx := context.Background()
	for step := range 800 {
		for _, c := range []engine.Check{{Policy: p, Key: "gold", Plan: "gold", Cost: 1}, {Policy: p, Key: "free", Cost: 1}} {
			for range 10 {
				c := c
				ok, err := e.Decide(ctx, []engine.Check{c}, make([]sluice.Result, 1))
				if err != nil {
					t.Fatal(err)
				}
				if ok && step >= 400 {
					admitted[c.Key]++
				}
			}
		}
		clock.Advance(10 * time.Millisecond)
		e.Shares().Recompute()
	}
	// 400 over the last 4 s: gold 2/3, free 1/3.
	if math.Abs(float64(admitted["gold"]-267)) > 10 || math.Abs(float64(admitted["free"]-133)) > 10 {
		t.Fatalf("admitted %v, want gold 267 and free 133", admitted)
	}
}

// The total's key is no tenant's.
func TestFairShareTotalKey(t *testing.T) {
	e := engine.New(storestack.Of(memoryStore()), newObserver(), nil)
	_, err := e.Decide(context.Background(), []engine.Check{{Policy: fairPolicy(true), Key: engine.TotalKey, Cost: 1}}, make([]sluice.Result, 1))
	var ce *engine.CheckError
	if !errors.As(err, &ce) || !errors.Is(err, sluice.ErrInvalidKey) {
		t.Fatalf("a check naming the total's key: %v, want a CheckError wrapping ErrInvalidKey", err)
	}
}

func newObserver() *observe.Observer {
	return observe.New("test", slog.New(slog.DiscardHandler), nil)
}

// A charge on a fair-share policy is what its decisions are: the key under
// its share and the policy's total, one total for all the policy's checks;
// so usage charged to one tenant leaves the others less of the limit.
func TestFairShareCharge(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	e := engine.New(storestack.Of(memory.New(memory.WithClock(clock))), newObserver(), nil, engine.WithClock(clock))
	p := fairPolicy(true)
	ctx := context.Background()
	results := make([]sluice.Result, 2)
	if err := e.Charge(ctx, []engine.Check{{Policy: p, Key: "a", Cost: 30}, {Policy: p, Key: "b", Cost: 40}}, results); err != nil {
		t.Fatal(err)
	}
	// The total, 100 a second, has 30 left: less than either key's own.
	if !results[0].Allowed || !results[1].Allowed || results[0].Remaining != 30 || results[1].Remaining != 30 {
		t.Fatalf("charges of 30 and 40: %+v, want both allowed with the total's 30 remaining", results)
	}
	res := make([]sluice.Result, 1)
	if ok, err := e.Decide(ctx, []engine.Check{{Policy: p, Key: "c", Cost: 31}}, res); err != nil || ok {
		t.Fatalf("a decision of 31 for another tenant: %v, %v; want denied by the total", ok, err)
	}
	if err := e.Charge(ctx, []engine.Check{{Policy: p, Key: "a", Cost: 80}}, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Allowed || res[0].Remaining != -50 {
		t.Fatalf("a charge of 80 with 30 left: %+v, want the total owing 50", res[0])
	}
	if ok, err := e.Decide(ctx, []engine.Check{{Policy: p, Key: "c", Cost: 1}}, res); err != nil || ok {
		t.Fatalf("a decision for another tenant while the total owes: %v, %v; want denied", ok, err)
	}
	_, err := e.Decide(ctx, []engine.Check{{Policy: p, Key: engine.TotalKey, Cost: 1}}, res)
	if err2 := e.Charge(ctx, []engine.Check{{Policy: p, Key: engine.TotalKey, Cost: 1}}, res); !errors.Is(err, sluice.ErrInvalidKey) || !errors.Is(err2, sluice.ErrInvalidKey) {
		t.Fatalf("the total's key: decide %v, charge %v; want ErrInvalidKey", err, err2)
	}
}
