package rstest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// diffEpoch starts the differential traces: in the future (see storetest.Epoch) and
// on a day boundary.
var diffEpoch = storetest.Epoch

// Differential replays random traces on a store and on sluice.Decide over a
// local map of states, and wants every Result equal. Like the Redis store, the
// map keeps a new state only from an admission: what Decide returns for a peek
// or a denial means the same for any later instant, but not for an earlier
// one, and the clock does run backwards here. The traces cover single requests of
// every algorithm, with limits that divide the period and limits that do not,
// bursts, peeks, costs up to the capacity, several requests at one instant,
// and the clock running backwards; all-or-nothing batches, mixing
// algorithms, against the memory store's model of them; and charges, alone
// and in ChargeAll sets, from 0 to beyond the caps, against sluice.Charge.
// With oneSlot, the prefix holds a hash tag, which puts every key into one
// Cluster slot.
func Differential(t *testing.T, tg Target, steps int, oneSlot bool) {
	for i, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewClock(diffEpoch)
			opts := []redisstore.Option{redisstore.WithClock(clock)}
			if oneSlot {
				opts = append(opts, redisstore.WithPrefix("{one}:"+Prefix()))
			}
			s := tg.New(t, opts...)
			d := &diff{
				t:      t,
				s:      s,
				clock:  clock,
				rng:    rand.New(rand.NewPCG(uint64(i), uint64(steps))),
				pols:   diffPolicies(a),
				keys:   []string{"a", "b{x}", "%7B", "}{", "user:42"},
				states: map[stateKey]sluice.State{},
			}
			for step := 0; step < steps; step++ {
				d.advance()
				switch r := d.rng.IntN(8); {
				case r < 2:
					d.batch(step)
				case r < 3:
					d.charges(step)
				default:
					d.single(step)
				}
			}
		})
	}
}

type stateKey struct{ policy, key string }

type diff struct {
	t      *testing.T
	s      *redisstore.Store
	clock  *storetest.Clock
	rng    *rand.Rand
	pols   []*sluice.Policy
	keys   []string
	states map[stateKey]sluice.State
}

// diffPolicies are a few policies of algorithm a, and one of another
// algorithm that batches mix in.
func diffPolicies(a sluice.Algorithm) []*sluice.Policy {
	ps := []sluice.Policy{
		{Name: "5-per-1s", Limit: 5, Period: time.Second},
		{Name: "7-per-100ms", Limit: 7, Period: 100 * time.Millisecond},     // T rounded up
		{Name: "13-per-1001us", Limit: 13, Period: 1001 * time.Microsecond}, // T rounded up
		{Name: "3-per-10s", Limit: 3, Period: 10 * time.Second},             // long T
		{Name: "1000-per-1s", Limit: 1000, Period: time.Second},             // long logs
		{Name: "9-per-1h", Limit: 9, Period: time.Hour},                     // P not dividing the jumps
	}
	switch a {
	case sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket:
		ps = append(ps,
			sluice.Policy{Name: "4-per-1s-burst-9", Limit: 4, Period: time.Second, Burst: 9},
			sluice.Policy{Name: "3-per-7ms-burst-1", Limit: 3, Period: 7 * time.Millisecond, Burst: 1})
	}
	var out []*sluice.Policy
	for i := range ps {
		ps[i].Algorithm = a
		out = append(out, &ps[i])
	}
	mix := &sluice.Policy{Name: "mix", Algorithm: sluice.FixedWindow, Limit: 20, Period: time.Second}
	if a == sluice.FixedWindow {
		mix.Algorithm = sluice.GCRA
	}
	return append(out, mix)
}

// advance moves the clock: often not at all, usually by a fraction of some
// policy's period, sometimes by more than a period, and now and then back.
func (d *diff) advance() {
	P := int64(d.pols[d.rng.IntN(len(d.pols))].Period / time.Microsecond)
	var us int64
	switch r := d.rng.IntN(100); {
	case r < 25:
		return
	case r < 85:
		us = d.rng.Int64N(P/4) + 1
	case r < 95:
		us = d.rng.Int64N(2*P) + 1
	default:
		us = -(d.rng.Int64N(P/8) + 1) // the clock runs backwards
	}
	d.clock.Advance(time.Duration(us) * time.Microsecond)
}

func (d *diff) cost(p *sluice.Policy) int64 {
	switch r := d.rng.IntN(10); {
	case r < 2:
		return 0
	case r < 7:
		return 1
	default:
		return d.rng.Int64N(p.Capacity()) + 1
	}
}

func (d *diff) single(step int) {
	d.t.Helper()
	p := d.pols[d.rng.IntN(len(d.pols))]
	key := d.keys[d.rng.IntN(len(d.keys))]
	cost := d.cost(p)
	now := d.clock.Now().UnixMicro()
	sk := stateKey{p.Name, key}
	next, want := sluice.Decide(p, d.states[sk], now, cost)
	if want.Allowed && cost > 0 {
		d.states[sk] = next // peeks and denials write nothing
	}
	got, err := d.s.Decide(context.Background(), sluice.Request{Policy: p, Key: key, Cost: cost})
	if err != nil {
		d.t.Fatalf("step %d: Decide(%s, %q, %d): %v", step, p.Name, key, cost, err)
	}
	if got != want {
		d.t.Fatalf("step %d: %s key %q cost %d at %dµs:\n got %+v\nwant %+v",
			step, p.Name, key, cost, now-diffEpoch.UnixMicro(), got, want)
	}
}

// batch checks DecideAll against the memory store's all-or-nothing rule:
// decide all; if all are admitted keep every new state, else keep the old
// ones and answer each as a peek sees it, denied, with the largest RetryAfter.
func (d *diff) batch(step int) {
	d.t.Helper()
	n := d.rng.IntN(4) + 1
	var reqs []sluice.Request
	seen := map[stateKey]bool{}
	for len(reqs) < n {
		p := d.pols[d.rng.IntN(len(d.pols))]
		key := d.keys[d.rng.IntN(len(d.keys))]
		if sk := (stateKey{p.Name, key}); !seen[sk] {
			seen[sk] = true
			reqs = append(reqs, sluice.Request{Policy: p, Key: key, Cost: d.cost(p)})
		}
	}
	now := d.clock.Now().UnixMicro()
	want := make([]sluice.Result, n)
	next := make([]sluice.State, n)
	allowed, retry := true, time.Duration(0)
	for i, r := range reqs {
		next[i], want[i] = sluice.Decide(r.Policy, d.states[stateKey{r.Policy.Name, r.Key}], now, r.Cost)
		if !want[i].Allowed {
			allowed, retry = false, max(retry, want[i].RetryAfter)
		}
	}
	for i, r := range reqs {
		sk := stateKey{r.Policy.Name, r.Key}
		if allowed {
			if r.Cost > 0 {
				d.states[sk] = next[i]
			}
			continue
		}
		_, want[i] = sluice.Decide(r.Policy, d.states[sk], now, 0)
		want[i].Allowed, want[i].RetryAfter = false, retry
	}
	got := make([]sluice.Result, n)
	if err := d.s.DecideAll(context.Background(), reqs, got); err != nil {
		d.t.Fatalf("step %d: DecideAll: %v", step, err)
	}
	for i, r := range reqs {
		if got[i] != want[i] {
			d.t.Fatalf("step %d: batch of %d at %dµs, request %d (%s key %q cost %d):\n got %+v\nwant %+v",
				step, n, now-diffEpoch.UnixMicro(), i, r.Policy.Name, r.Key, r.Cost, got[i], want[i])
		}
	}
}
