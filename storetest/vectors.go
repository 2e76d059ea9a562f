package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// step is one request at Epoch+at, and the Result the contract requires.
type step struct {
	at   time.Duration
	cost int64
	want sluice.Result
}

const (
	ms = time.Millisecond
	µs = time.Microsecond
	s  = time.Second
)

func ok(limit, remaining int64, reset time.Duration) sluice.Result {
	return sluice.Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func deny(limit, remaining int64, retry, reset time.Duration) sluice.Result {
	return sluice.Result{Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func delayed(r sluice.Result, d time.Duration) sluice.Result { r.Delay = d; return r }

// vectors are worked by hand from the contract's formulas; each comment shows
// the arithmetic.
var vectors = []struct {
	name   string
	policy sluice.Policy
	steps  []step
}{
	{"fixed_window", sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 3, Period: s}, []step{
		{900 * ms, 2, ok(3, 1, 100*ms)},
		{950 * ms, 2, deny(3, 1, 50*ms, 50*ms)}, // 2+2 > 3: wait for the window at 1s
		{999*ms + 999*µs, 1, ok(3, 0, 1*µs)},    // last µs of the window
		{1 * s, 3, ok(3, 0, 1*s)},               // new window: 6 units within 100ms
		{1 * s, 0, deny(3, 0, 1*s, 1*s)},        // a peek with nothing left: denied
		{1*s + 500*ms, 1, deny(3, 0, 500*ms, 500*ms)},
	}},
	{"sliding_log", sluice.Policy{Name: "sl", Algorithm: sluice.SlidingLog, Limit: 3, Period: s}, []step{
		{0, 1, ok(3, 2, 1*s)},
		{200 * ms, 2, ok(3, 0, 1*s)},
		{500 * ms, 1, deny(3, 0, 500*ms, 700*ms)}, // the entry at 0 leaves at 1s
		{1 * s, 2, deny(3, 1, 200*ms, 200*ms)},    // 0 left; 2+2 > 3 until the entry at 0.2s leaves
		{1 * s, 1, ok(3, 0, 1*s)},
		{1*s + 200*ms, 2, ok(3, 0, 1*s)}, // the two from 0.2s left at 1.2s
	}},
	{"sliding_window", sluice.Policy{Name: "sw", Algorithm: sluice.SlidingWindow, Limit: 10, Period: s}, []step{
		{500 * ms, 6, ok(10, 4, 1500*ms)},
		// prev 6 weighs 6·0.75 = 4.5: 4.5+5 ≤ 10; remaining 10−5−ceil(4.5) = 0
		{1250 * ms, 5, ok(10, 0, 1750*ms)},
		// 6·(P−e) ≤ (10−5−1)·P ⇔ e ≥ P − floor(4e6/6) = 333334µs
		{1250 * ms, 1, deny(10, 0, 83334*µs, 1750*ms)},
		{1333*ms + 333*µs, 1, deny(10, 0, 1*µs, 1666*ms+667*µs)},
		{1333*ms + 334*µs, 1, ok(10, 0, 1666*ms+666*µs)},
	}},
	{"sliding_window_rolls_over", sluice.Policy{Name: "sw2", Algorithm: sluice.SlidingWindow, Limit: 4, Period: s}, []step{
		{900 * ms, 4, ok(4, 0, 1100*ms)},
		// cur+1 > 4: next window, where prev = 4: 4·(P−e) ≤ 3·P ⇔ e ≥ 250ms
		{950 * ms, 1, deny(4, 0, 300*ms, 1050*ms)},
		{1249*ms + 999*µs, 1, deny(4, 0, 1*µs, 750*ms+1*µs)}, // prev leaves at 2s
		{1250 * ms, 1, ok(4, 0, 1750*ms)},
	}},
	{"token_bucket", sluice.Policy{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 10, Period: s, Burst: 5}, []step{
		{0, 5, ok(10, 0, 500*ms)}, // T = 100ms, bucket 5
		{0, 1, deny(10, 0, 100*ms, 500*ms)},
		{250 * ms, 2, ok(10, 0, 450*ms)}, // 2.5 tokens back; 0.5 left
		{250 * ms, 1, deny(10, 0, 50*ms, 450*ms)},
		{300 * ms, 1, ok(10, 0, 500*ms)},
		{1 * s, 0, ok(10, 5, 0)},
	}},
	{"gcra", sluice.Policy{Name: "gc", Algorithm: sluice.GCRA, Limit: 10, Period: s, Burst: 5}, []step{
		{0, 5, ok(10, 0, 500*ms)},
		{0, 1, deny(10, 0, 100*ms, 500*ms)},
		{250 * ms, 2, ok(10, 0, 450*ms)},
		{250 * ms, 1, deny(10, 0, 50*ms, 450*ms)},
		{300 * ms, 1, ok(10, 0, 500*ms)},
		{1 * s, 0, ok(10, 5, 0)},
	}},
	{"gcra_rounds_interval_up", sluice.Policy{Name: "g3", Algorithm: sluice.GCRA, Limit: 3, Period: s}, []step{
		{0, 3, ok(3, 0, 1000002*µs)}, // T = ceil(1s/3) = 333334µs
		{0, 1, deny(3, 0, 333334*µs, 1000002*µs)},
	}},
	{"leaky_bucket", sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 10, Period: s, Burst: 5}, []step{
		{0, 1, delayed(ok(10, 4, 100*ms), 0)},
		{0, 1, delayed(ok(10, 3, 200*ms), 100*ms)},
		{0, 3, delayed(ok(10, 0, 500*ms), 200*ms)},
		{0, 1, deny(10, 0, 100*ms, 500*ms)},
		{150 * ms, 1, delayed(ok(10, 0, 450*ms), 350*ms)}, // queue tail at 500ms
	}},
}

func testVectors(t *testing.T, open Opener) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, open)
			l := e.limiter(v.policy)
			for i, st := range v.steps {
				e.at(st.at)
				if got := e.allow(l, "k", st.cost); got != st.want {
					t.Fatalf("step %d (at %v, cost %d):\n got %+v\nwant %+v", i, st.at, st.cost, got, st.want)
				}
			}
		})
	}
}
