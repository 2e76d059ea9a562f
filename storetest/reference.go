package storetest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// expected is what the model says a request of n units at now returns, and
// records the admission in the model.
func (m *model) expected(now, n int64) sluice.Result {
	res := sluice.Result{Limit: m.L}
	if ask := max(n, 1); m.admits(now, ask) { // a peek is allowed when one unit would be
		res.Allowed = true
		if d := m.admit(now, n); m.alg == sluice.LeakyBucket {
			res.Delay = time.Duration(d) * time.Microsecond
		}
	} else {
		res.RetryAfter = time.Duration(m.retryAfter(now, ask)) * time.Microsecond
	}
	res.Remaining = m.remaining(now)
	res.ResetAfter = time.Duration(m.resetAfter(now)) * time.Microsecond
	return res
}

// testReference runs randomized traces against the store and the reference
// model side by side: every Result field must match. A third of the denials are
// probed on the store itself: denied 1µs before RetryAfter, admitted at it.
func testReference(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		for _, p := range policies(a) {
			t.Run(p.Name, func(t *testing.T) {
				e := newEnv(t, open)
				l := e.limiter(p)
				rng := rand.New(rand.NewPCG(uint64(len(a)), uint64(p.Limit)))
				models := map[string]*model{}
				keys := []string{"a", "b", "c"}
				period, capacity := us(p.Period), p.Capacity()
				check := func(step int, key string, cost int64) sluice.Result {
					t.Helper()
					m := models[key]
					if m == nil {
						m = newModel(p)
						models[key] = m
					}
					now := e.nowMicros()
					want := m.expected(now, cost)
					got := e.allow(l, key, cost)
					if got != want {
						t.Fatalf("step %d: key %q cost %d at %dµs after Epoch:\n got %+v\nwant %+v",
							step, key, cost, now-Epoch.UnixMicro(), got, want)
					}
					return got
				}
				for i := 0; i < 250; i++ {
					switch r := rng.IntN(10); {
					case r < 3: // same instant
					case r < 9:
						e.clock.Advance(time.Duration(rng.Int64N(period/4)+1) * time.Microsecond)
					default:
						e.clock.Advance(time.Duration(rng.Int64N(2*period)+1) * time.Microsecond)
					}
					key := keys[rng.IntN(len(keys))]
					cost := randomCost(rng, capacity)
					res := check(i, key, cost)
					if !res.Allowed && rng.IntN(3) == 0 {
						start := e.clock.Now()
						if res.RetryAfter > time.Microsecond {
							e.clock.Set(start.Add(res.RetryAfter - time.Microsecond))
							if check(i, key, cost).Allowed {
								t.Fatalf("step %d: admitted 1µs before RetryAfter %v", i, res.RetryAfter)
							}
						}
						e.clock.Set(start.Add(res.RetryAfter))
						if !check(i, key, cost).Allowed {
							t.Fatalf("step %d: denied at RetryAfter %v", i, res.RetryAfter)
						}
					}
				}
			})
		}
	})
}

// randomCost draws a request's cost for a random trace: a peek (0) one time
// in five, up to the capacity three times in ten, else 1.
func randomCost(rng *rand.Rand, capacity int64) int64 {
	switch r := rng.IntN(10); {
	case r < 2:
		return 0
	case r < 5:
		return rng.Int64N(capacity) + 1
	}
	return 1
}
