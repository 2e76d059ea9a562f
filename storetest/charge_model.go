package storetest

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// charged is what the model says a charge of n units at now returns, and
// records it: the contract's "Charging usage", straight from the history
// (or the exact tokens). The charge fits when a decision would have admitted
// it; it is recorded either way, so the key may owe units. The log records
// it as an entry of its own unless it already holds L entries, when it joins
// the newest, which moves to now. The suite's charges stay far below the
// caps, which the bounds test checks on its own.
func (m *model) charged(now, n int64) sluice.Result {
	res := sluice.Result{Limit: m.L, Allowed: m.admits(now, n)}
	if n > 0 {
		m.record(now, n)
	}
	res.Remaining = m.owed(now)
	if !res.Allowed {
		res.RetryAfter = time.Duration(m.retryAfter(now, 1)) * time.Microsecond
	}
	res.ResetAfter = time.Duration(m.resetAfter(now)) * time.Microsecond
	return res
}

// record adds n units charged at now, whether or not they fit.
func (m *model) record(now, n int64) {
	if m.bucket() {
		m.tokens = m.tokensAt(now).Sub(m.tokensAt(now), new(big.Rat).SetInt64(n))
		m.tokenAt = now
		m.lastEnd = max(now, m.lastEnd) + n*m.T // the queue's tail moves as for an admission
		m.debt += n * m.T
		return
	}
	if m.alg == sluice.SlidingLog {
		live := 0
		for _, a := range m.hist {
			if a.t > now-m.P {
				live++
			}
		}
		if int64(live) >= m.L {
			last := &m.hist[len(m.hist)-1]
			last.t, last.n = now, last.n+n
			return
		}
	}
	m.hist = append(m.hist, admission{now, n})
}

// owed is what is left at t, negative when the key owes units: L minus what
// the window, the log or the weighted windows hold; the whole tokens of a
// bucket, rounded down.
func (m *model) owed(t int64) int64 {
	w := t - t%m.P
	switch m.alg {
	case sluice.FixedWindow:
		return m.L - m.sum(w, w+m.P)
	case sluice.SlidingLog:
		return m.L - m.sum(t-m.P+1, t+1)
	case sluice.SlidingWindow:
		weighted := new(big.Rat).SetFrac64(m.sum(w-m.P, w)*(m.P-(t-w)), m.P)
		return m.L - m.sum(w, w+m.P) - ceilRat(weighted)
	}
	return floorRat(m.tokensAt(t))
}

func floorRat(r *big.Rat) int64 {
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q.Int64()
}

func ceilRat(r *big.Rat) int64 { return -floorRat(new(big.Rat).Neg(r)) }

// testChargeReference runs randomized traces of decisions and charges (up to
// three times the capacity) against the store and the model: every Result
// field must match, and a third of the charges that leave the key owing are
// probed 1µs before their RetryAfter (denied) and at it (admitted).
func testChargeReference(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		for _, p := range policies(a) {
			t.Run(p.Name, func(t *testing.T) {
				e := newEnv(t, open)
				e.charger()
				l := e.limiter(p)
				rng := rand.New(rand.NewPCG(uint64(len(a)), 31+uint64(p.Limit)))
				models := map[string]*model{}
				keys := []string{"a", "b"}
				period, capacity := us(p.Period), p.Capacity()
				modelOf := func(key string) *model {
					if models[key] == nil {
						models[key] = newModel(p)
					}
					return models[key]
				}
				check := func(step int, key string, cost int64) sluice.Result {
					t.Helper()
					now := e.nowMicros()
					want := modelOf(key).expected(now, cost)
					if got := e.allow(l, key, cost); got != want {
						t.Fatalf("step %d: key %q cost %d at %dµs after Epoch:\n got %+v\nwant %+v",
							step, key, cost, now-Epoch.UnixMicro(), got, want)
					}
					return want
				}
				owing := 0
				for i := 0; i < 250; i++ {
					switch r := rng.IntN(10); {
					case r < 3: // same instant
					case r < 9:
						e.clock.Advance(time.Duration(rng.Int64N(period/4)+1) * time.Microsecond)
					default:
						e.clock.Advance(time.Duration(rng.Int64N(2*period)+1) * time.Microsecond)
					}
					key := keys[rng.IntN(len(keys))]
					if rng.IntN(2) == 0 {
						check(i, key, randomCost(rng, capacity))
						continue
					}
					cost := rng.Int64N(3*capacity + 1)
					now := e.nowMicros()
					want := modelOf(key).charged(now, cost)
					got := e.charge(l, key, cost)
					if got != want {
						t.Fatalf("step %d: charge key %q cost %d at %dµs after Epoch:\n got %+v\nwant %+v",
							i, key, cost, now-Epoch.UnixMicro(), got, want)
					}
					if got.Remaining < 0 {
						owing++
					}
					if !got.Allowed && rng.IntN(3) == 0 {
						start := e.clock.Now()
						e.clock.Set(start.Add(got.RetryAfter - time.Microsecond))
						if check(i, key, 1).Allowed {
							t.Fatalf("step %d: admitted 1µs before the charge's RetryAfter %v", i, got.RetryAfter)
						}
						e.clock.Set(start.Add(got.RetryAfter))
						if !check(i, key, 1).Allowed {
							t.Fatalf("step %d: denied at the charge's RetryAfter %v", i, got.RetryAfter)
						}
					}
				}
				if owing == 0 {
					t.Fatalf("no charge left a key owing: the trace tests nothing")
				}
			})
		}
	})
}
