package storetest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testGuarantees drives one key hard with random bursts and checks, from the
// store's answers alone, the bound each algorithm promises.
func testGuarantees(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		for _, p := range policies(a) {
			t.Run(p.Name, func(t *testing.T) {
				e := newEnv(t, open)
				l := e.limiter(p)
				rng := rand.New(rand.NewPCG(7, uint64(p.Limit)))
				period := us(p.Period)
				var adm []admission
				var deps []int64 // leaky bucket departures, in admission order
				for i := 0; i < 600; i++ {
					if rng.IntN(4) == 0 {
						e.clock.Advance(time.Duration(rng.Int64N(period/3)+1) * time.Microsecond)
					}
					n := int64(1)
					if rng.IntN(4) == 0 {
						n = rng.Int64N(p.Capacity()) + 1
					}
					now := e.nowMicros()
					res := e.allow(l, "hot", n)
					if res.Allowed {
						adm = append(adm, admission{now, n})
						deps = append(deps, now+us(res.Delay))
					}
				}
				checkBound(t, p, adm)
				if a == sluice.LeakyBucket {
					checkDepartures(t, p, adm, deps)
				}
			})
		}
	})
}

// checkBound asserts the guarantee column of the contract on admitted traffic.
func checkBound(t *testing.T, p sluice.Policy, adm []admission) {
	t.Helper()
	L, P, B := p.Limit, us(p.Period), p.Capacity()
	for j := range adm {
		tj := adm[j].t
		switch p.Algorithm {
		case sluice.FixedWindow: // ≤ L per aligned window
			w := tj - tj%P
			if got := sumIn(adm, w, w+P); got > L {
				t.Fatalf("fixed window [%d, %d) admitted %d > L=%d", w, w+P, got, L)
			}
		case sluice.SlidingLog: // ≤ L in every span (t−P, t]
			if got := sumIn(adm, tj-P+1, tj+1); got > L {
				t.Fatalf("span (%d, %d] admitted %d > L=%d", tj-P, tj, got, L)
			}
		case sluice.SlidingWindow: // an approximation: < 2L in every span
			if got := sumIn(adm, tj-P+1, tj+1); got >= 2*L {
				t.Fatalf("span (%d, %d] admitted %d ≥ 2L=%d", tj-P, tj, got, 2*L)
			}
		default: // admitted in [ti, tj] ≤ B + L·(tj−ti)/P
			var sum int64
			for i := j; i >= 0; i-- {
				sum += adm[i].n
				if (sum-B)*P > L*(tj-adm[i].t) {
					t.Fatalf("[%d, %d] admitted %d > B + L·Δ/P = %d + %d·%d/%d", adm[i].t, tj, sum, B, L, tj-adm[i].t, P)
				}
			}
		}
	}
}

// checkDepartures asserts the leaky bucket shapes: a request never leaves before
// it arrives, and while the queue is busy departures are spaced exactly n·T.
func checkDepartures(t *testing.T, p sluice.Policy, adm []admission, deps []int64) {
	t.Helper()
	T := newModel(p).T
	for k := 1; k < len(adm); k++ {
		earliest := deps[k-1] + adm[k-1].n*T
		want := max(adm[k].t, earliest)
		if deps[k] != want {
			t.Fatalf("departure %d at %d, want max(arrival %d, previous departure + n·T = %d)", k, deps[k], adm[k].t, earliest)
		}
	}
}

func sumIn(adm []admission, from, to int64) int64 {
	var s int64
	for _, a := range adm {
		if a.t >= from && a.t < to {
			s += a.n
		}
	}
	return s
}
