package storetest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// changeStep is one request at Epoch+at under version v of a vector's policies,
// and the Result the contract requires.
type changeStep struct {
	at   time.Duration
	v    int
	cost int64
	want sluice.Result
}

// changeVectors change a policy between requests on one key, keeping its name
// (and, but for the last, its algorithm), worked by hand from the contract's
// "Changing a policy": the windows count what they hold against the new limit,
// the buckets keep their missing credit in µs. Remaining never goes below
// zero, a peek is denied (nothing is left), and RetryAfter is exact however
// far the state is over the new limit.
var changeVectors = []struct {
	name     string
	versions []sluice.Policy
	steps    []changeStep
}{
	{"fixed_window_lowered_then_raised", []sluice.Policy{
		{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 5, Period: s},
		{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 3, Period: s},
	}, []changeStep{
		{0, 0, 5, ok(5, 0, 1*s)},
		{100 * ms, 1, 0, deny(3, 0, 900*ms, 900*ms)},   // 5 counted against 3: nothing left, not −2
		{100 * ms, 1, 1, deny(3, 0, 900*ms, 900*ms)},   // until the next window
		{1 * s, 1, 3, ok(3, 0, 1*s)},                   // a fresh window of 3
		{1 * s, 0, 2, ok(5, 0, 1*s)},                   // raised: 3 + 2 ≤ 5 at once
		{1*s + 1*ms, 0, 1, deny(5, 0, 999*ms, 999*ms)}, // and no more
	}},
	{"fixed_window_raised", []sluice.Policy{
		{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 3, Period: s},
		{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 5, Period: s},
	}, []changeStep{
		{0, 0, 3, ok(3, 0, 1*s)},
		{0, 0, 1, deny(3, 0, 1*s, 1*s)},
		{0, 1, 2, ok(5, 0, 1*s)}, // 3 + 2 ≤ 5
		{500 * ms, 1, 1, deny(5, 0, 500*ms, 500*ms)},
	}},
	{"sliding_log_lowered", []sluice.Policy{
		{Name: "sl", Algorithm: sluice.SlidingLog, Limit: 5, Period: s},
		{Name: "sl", Algorithm: sluice.SlidingLog, Limit: 3, Period: s},
	}, []changeStep{
		{0, 0, 2, ok(5, 3, 1*s)},
		{100 * ms, 0, 3, ok(5, 0, 1*s)},
		{200 * ms, 1, 0, deny(3, 0, 900*ms, 900*ms)}, // 5 logged against 3
		{200 * ms, 1, 1, deny(3, 0, 900*ms, 900*ms)}, // 5−2+1 > 3: both entries must leave
		{1 * s, 1, 0, deny(3, 0, 100*ms, 100*ms)},    // the 2 at 0 left; 3 remain logged
		{1 * s, 1, 1, deny(3, 0, 100*ms, 100*ms)},
		{1*s + 100*ms, 1, 3, ok(3, 0, 1*s)},
	}},
	{"sliding_window_lowered", []sluice.Policy{
		{Name: "sw", Algorithm: sluice.SlidingWindow, Limit: 10, Period: s},
		{Name: "sw", Algorithm: sluice.SlidingWindow, Limit: 4, Period: s},
	}, []changeStep{
		{500 * ms, 0, 6, ok(10, 4, 1500*ms)},
		// prev 6 weighs 6·0.75 = 4.5 > 4
		{1250 * ms, 1, 0, deny(4, 0, 250*ms, 750*ms)},
		// 6·(P−e) ≤ (4−0−1)·P ⇔ e ≥ 500ms
		{1250 * ms, 1, 1, deny(4, 0, 250*ms, 750*ms)},
		{1499*ms + 999*µs, 1, 1, deny(4, 0, 1*µs, 500*ms+1*µs)},
		// remaining 4 − 1 − ceil(6·0.5) = 0
		{1500 * ms, 1, 1, ok(4, 0, 1500*ms)},
	}},
	{"sliding_window_lowered_below_cur", []sluice.Policy{
		{Name: "sw", Algorithm: sluice.SlidingWindow, Limit: 10, Period: s},
		{Name: "sw", Algorithm: sluice.SlidingWindow, Limit: 4, Period: s},
	}, []changeStep{
		{0, 0, 8, ok(10, 2, 2*s)},
		{100 * ms, 1, 0, deny(4, 0, 1525*ms, 1900*ms)},
		// next window, prev = 8: 8·(P−e) ≤ 3·P ⇔ e ≥ 625ms
		{100 * ms, 1, 1, deny(4, 0, 1525*ms, 1900*ms)},
		{1624*ms + 999*µs, 1, 1, deny(4, 0, 1*µs, 375*ms+1*µs)},
		{1625 * ms, 1, 1, ok(4, 0, 1375*ms)},
	}},
	{"fixed_window_period_lengthened", periods(sluice.FixedWindow, s, 2*s), []changeStep{
		{1500 * ms, 0, 3, ok(3, 0, 500*ms)},
		{1600 * ms, 1, 0, deny(3, 0, 400*ms, 400*ms)}, // the 3 belong to the new window [0, 2s)
		{1600 * ms, 1, 1, deny(3, 0, 400*ms, 400*ms)},
		{2 * s, 1, 3, ok(3, 0, 2*s)},
	}},
	{"fixed_window_period_shortened", periods(sluice.FixedWindow, 2*s, s), []changeStep{
		{500 * ms, 0, 3, ok(3, 0, 1500*ms)},
		{1200 * ms, 1, 1, ok(3, 2, 800*ms)}, // the 3 belong to [0, 1s), which is over
	}},
	{"sliding_log_period_lengthened", periods(sluice.SlidingLog, s, 2*s), []changeStep{
		{0, 0, 1, ok(3, 2, 1*s)},
		{1100 * ms, 0, 1, ok(3, 2, 1*s)}, // the entry at 0 has left, and is dropped
		{1200 * ms, 1, 0, ok(3, 2, 1900*ms)},
		{1300 * ms, 1, 2, ok(3, 0, 2*s)},
		{1300 * ms, 1, 1, deny(3, 0, 1800*ms, 2*s)}, // the entry at 1.1s counts until 3.1s
	}},
	{"sliding_window_period_lengthened", periods(sluice.SlidingWindow, s, 2*s), []changeStep{
		{1500 * ms, 0, 3, ok(3, 0, 1500*ms)},
		// cur 3 in the new window [0, 2s), leaving at 4s: one more unit
		// waits for the next window, where 3·(2s−e)/2s ≤ 2 ⇔ e ≥ 666,667µs
		{1600 * ms, 1, 0, deny(3, 0, 1066667*µs, 2400*ms)},
		{2 * s, 1, 0, deny(3, 0, 666667*µs, 2*s)}, // now prev 3, weighing 3 at e = 0
		{3 * s, 1, 1, ok(3, 0, 3*s)},              // 3·(2s−1s)/2s = 1.5; 1.5 + 1 ≤ 3
	}},
	{"token_bucket_burst_shrinks", bursts(sluice.TokenBucket), burstShrinkSteps(false)},
	{"gcra_burst_shrinks", bursts(sluice.GCRA), burstShrinkSteps(false)},
	{"leaky_bucket_burst_shrinks", bursts(sluice.LeakyBucket), burstShrinkSteps(true)},
	{"token_bucket_raised", rates(sluice.TokenBucket, 3, 5), raisedSteps},
	{"gcra_raised", rates(sluice.GCRA, 3, 5), raisedSteps},
	{"gcra_lowered", rates(sluice.GCRA, 5, 3), []changeStep{
		{0, 0, 5, ok(5, 0, 1*s)},
		// missing 1,000,000 + T' 333,334 − B'·T' 1,000,002
		{0, 1, 1, deny(3, 0, 333332*µs, 1*s)},
		{333332 * µs, 1, 1, ok(3, 0, 1000002*µs)}, // full again after 3·T'
	}},
	{"gcra_raised_partly_used", rates(sluice.GCRA, 3, 5), []changeStep{
		{0, 0, 2, ok(3, 1, 666668*µs)},
		// ⌊(1,000,000 − 666,668) / 200,000⌋ = 1
		{0, 1, 0, ok(5, 1, 666668*µs)},
		{0, 1, 1, ok(5, 0, 866668*µs)},
	}},
	{"one_name_two_algorithms", []sluice.Policy{
		{Name: "same", Algorithm: sluice.FixedWindow, Limit: 2, Period: s},
		{Name: "same", Algorithm: sluice.TokenBucket, Limit: 2, Period: s},
	}, []changeStep{
		{0, 0, 2, ok(2, 0, 1*s)},
		{0, 1, 1, ok(2, 1, 500*ms)},     // a state of its own: a full bucket
		{0, 0, 0, deny(2, 0, 1*s, 1*s)}, // the window's state is still there
		{0, 1, 0, ok(2, 1, 500*ms)},
	}},
}

// bursts is 10 per second with burst 10, then with burst 2.
func bursts(a sluice.Algorithm) []sluice.Policy {
	return []sluice.Policy{
		{Name: "b", Algorithm: a, Limit: 10, Period: s, Burst: 10},
		{Name: "b", Algorithm: a, Limit: 10, Period: s, Burst: 2},
	}
}

// burstShrinkSteps: all 10 used, then a bucket of 2 (T = 100ms): 1s of credit
// is missing from a bucket that holds 200ms, so one unit waits 900ms.
func burstShrinkSteps(leaky bool) []changeStep {
	admitted := ok(10, 0, 200*ms) // 100ms left plus the unit's 100ms
	if leaky {
		admitted = delayed(admitted, 100*ms) // the queue's tail leaves at 1s
	}
	return []changeStep{
		{0, 0, 10, ok(10, 0, 1*s)},
		{0, 1, 0, deny(10, 0, 900*ms, 1*s)},
		{0, 1, 1, deny(10, 0, 900*ms, 1*s)},
		{100 * ms, 1, 1, deny(10, 0, 800*ms, 900*ms)},
		{899*ms + 999*µs, 1, 1, deny(10, 0, 1*µs, 100*ms+1*µs)},
		{900 * ms, 1, 1, admitted},
		{1 * s, 1, 0, ok(10, 1, 100*ms)},
		{1100 * ms, 1, 0, ok(10, 2, 0)},
	}
}

// periods is 3 per `from`, then 3 per `to`.
func periods(a sluice.Algorithm, from, to time.Duration) []sluice.Policy {
	return []sluice.Policy{
		{Name: "pe", Algorithm: a, Limit: 3, Period: from},
		{Name: "pe", Algorithm: a, Limit: 3, Period: to},
	}
}

// rates is `from` per second, then `to` per second, each with the default burst.
func rates(a sluice.Algorithm, from, to int64) []sluice.Policy {
	return []sluice.Policy{
		{Name: "r", Algorithm: a, Limit: from, Period: s},
		{Name: "r", Algorithm: a, Limit: to, Period: s},
	}
}

// raisedSteps: 3 per second all used (T = 333,334µs, so 1,000,002µs missing),
// then 5 per second (B'·T' = 1,000,000µs): the bucket is still empty, and the
// next unit waits T' plus the 2µs by which the old intervals exceed a second.
var raisedSteps = []changeStep{
	{0, 0, 3, ok(3, 0, 1000002*µs)},
	{0, 1, 0, deny(5, 0, 200002*µs, 1000002*µs)},
	{0, 1, 1, deny(5, 0, 200002*µs, 1000002*µs)},
	{200001 * µs, 1, 1, deny(5, 0, 1*µs, 800001*µs)},
	{200002 * µs, 1, 1, ok(5, 0, 1000000*µs)},
}

func testChangeVectors(t *testing.T, open Opener) {
	for _, v := range changeVectors {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, open)
			ls := make([]*sluice.Limiter, len(v.versions))
			for i, p := range v.versions {
				ls[i] = e.limiter(p)
			}
			for i, st := range v.steps {
				e.at(st.at)
				if got := e.allow(ls[st.v], "k", st.cost); got != st.want {
					t.Fatalf("step %d (at %v, version %d, cost %d):\n got %+v\nwant %+v", i, st.at, st.v, st.cost, got, st.want)
				}
			}
		})
	}
}

// changeVersions are the versions of one policy a trace switches between:
// limits raised and lowered, and for the buckets bursts and periods too.
// The windows keep their period: a new period regroups the admissions a
// window or the log holds, which the traces leave to the vectors.
func changeVersions(a sluice.Algorithm) []sluice.Policy {
	ps := []sluice.Policy{
		{Name: "pc", Algorithm: a, Limit: 5, Period: s},
		{Name: "pc", Algorithm: a, Limit: 3, Period: s},
		{Name: "pc", Algorithm: a, Limit: 8, Period: s},
		{Name: "pc", Algorithm: a, Limit: 1, Period: s},
	}
	if a == sluice.TokenBucket || a == sluice.LeakyBucket || a == sluice.GCRA {
		ps = append(ps,
			sluice.Policy{Name: "pc", Algorithm: a, Limit: 10, Period: s, Burst: 2},
			sluice.Policy{Name: "pc", Algorithm: a, Limit: 10, Period: s, Burst: 12},
			sluice.Policy{Name: "pc", Algorithm: a, Limit: 7, Period: 3 * s, Burst: 4},
		)
	}
	return ps
}

// testChangeReference runs randomized traces of (time, policy version, key,
// cost) against the store and the model, which applies each change by
// model.change: every Result field must match, and a third of the denials are
// probed 1µs before RetryAfter and at it.
func testChangeReference(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		versions := changeVersions(a)
		ls := make([]*sluice.Limiter, len(versions))
		for i, p := range versions {
			ls[i] = e.limiter(p)
		}
		rng := rand.New(rand.NewPCG(uint64(len(a)), 18))
		keys := []string{"a", "b"}
		models := map[string]*model{}
		current := map[string]int{} // the version each key's model was last told of
		check := func(step, v int, key string, cost int64) sluice.Result {
			t.Helper()
			now := e.nowMicros()
			m := models[key]
			if m == nil {
				m = newModel(versions[v])
				models[key] = m
			} else if current[key] != v {
				m.change(versions[v], now)
			}
			current[key] = v
			want := m.expected(now, cost)
			got := e.allow(ls[v], key, cost)
			if got != want {
				t.Fatalf("step %d: key %q version %d (%+v) cost %d at %dµs after Epoch:\n got %+v\nwant %+v",
					step, key, v, versions[v], cost, now-Epoch.UnixMicro(), got, want)
			}
			return got
		}
		v := 0
		for i := 0; i < 300; i++ {
			if rng.IntN(6) == 0 {
				v = rng.IntN(len(versions))
			}
			if r := rng.IntN(10); r >= 3 { // else the same instant
				e.clock.Advance(time.Duration(rng.Int64N(us(s)/4)+1) * time.Microsecond)
			}
			key := keys[rng.IntN(len(keys))]
			cost := randomCost(rng, versions[v].Capacity())
			res := check(i, v, key, cost)
			if !res.Allowed && rng.IntN(3) == 0 {
				start := e.clock.Now()
				if res.RetryAfter > time.Microsecond {
					e.clock.Set(start.Add(res.RetryAfter - time.Microsecond))
					if check(i, v, key, cost).Allowed {
						t.Fatalf("step %d: admitted 1µs before RetryAfter %v", i, res.RetryAfter)
					}
				}
				e.clock.Set(start.Add(res.RetryAfter))
				if !check(i, v, key, cost).Allowed {
					t.Fatalf("step %d: denied at RetryAfter %v", i, res.RetryAfter)
				}
			}
		}
	})
}
