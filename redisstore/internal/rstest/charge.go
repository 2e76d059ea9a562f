package rstest

import (
	"context"
	"math"

	"github.com/sluicehq/sluice"
)

// chargeCost draws a charge's cost: often within the capacity, often beyond
// it, now and then far beyond every cap.
func (d *diff) chargeCost(p *sluice.Policy) int64 {
	switch r := d.rng.IntN(10); {
	case r < 1:
		return 0
	case r < 5:
		return d.rng.Int64N(p.Capacity()) + 1
	case r < 9:
		return d.rng.Int64N(4*p.Capacity()) + 1
	default:
		return min(sluice.MaxCharge, int64(math.MaxInt64)>>d.rng.IntN(20))
	}
}

// charges checks a charge alone, or a ChargeAll set of up to four (a key
// may come twice), against sluice.Charge applied in order to the map's
// states. A charge of a cost writes its state, as the store does.
func (d *diff) charges(step int) {
	d.t.Helper()
	n := 1
	if d.rng.IntN(2) == 0 {
		n = d.rng.IntN(4) + 1
	}
	reqs := make([]sluice.Request, n)
	for i := range reqs {
		p := d.pols[d.rng.IntN(len(d.pols))]
		reqs[i] = sluice.Request{Policy: p, Key: d.keys[d.rng.IntN(len(d.keys))], Cost: d.chargeCost(p)}
	}
	now := d.clock.Now().UnixMicro()
	want := make([]sluice.Result, n)
	for i, r := range reqs {
		sk := stateKey{r.Policy.Name, r.Key}
		next, res := sluice.Charge(r.Policy, d.states[sk], now, r.Cost)
		if r.Cost > 0 {
			d.states[sk] = next
		}
		want[i] = res
	}
	got := make([]sluice.Result, n)
	var err error
	if n == 1 {
		got[0], err = d.s.Charge(context.Background(), reqs[0])
	} else {
		err = d.s.ChargeAll(context.Background(), reqs, got)
	}
	if err != nil {
		d.t.Fatalf("step %d: charging %d: %v", step, n, err)
	}
	for i, r := range reqs {
		if got[i] != want[i] {
			d.t.Fatalf("step %d: charge %d of %d at %dµs (%s key %q cost %d):\n got %+v\nwant %+v",
				step, i, n, now-diffEpoch.UnixMicro(), r.Policy.Name, r.Key, r.Cost, got[i], want[i])
		}
	}
}
