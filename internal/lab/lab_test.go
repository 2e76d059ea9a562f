package lab

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// run runs a scenario or fails the test.
func run(t *testing.T, scenario string, o Options) *Report {
	t.Helper()
	r, err := Run(context.Background(), scenario, o)
	if err != nil {
		t.Fatalf("Run(%s): %v", scenario, err)
	}
	for _, row := range r.Rows {
		t.Logf("%-45s sent %6d admitted %6d max_in_span %5d bound %4d overshoot %.3f",
			row.Variant, row.Sent, row.Admitted, row.MaxInSpan, row.Bound, row.Overshoot)
	}
	return r
}

// The checks below are shared by the memory tests here and the Redis tests
// in redis_test.go: the same scenario must show the same thing on both.

func checkBoundary(t *testing.T, store string) {
	r := run(t, Boundary, Options{Store: store})
	if len(r.Rows) != len(sluice.Algorithms) {
		t.Fatalf("%d rows, want one per algorithm (%d)", len(r.Rows), len(sluice.Algorithms))
	}
	for _, row := range r.Rows {
		switch sluice.Algorithm(row.Variant) {
		case sluice.FixedWindow:
			if row.Overshoot < 1.9 || row.Overshoot > 2.0 {
				t.Errorf("fixed_window overshoot %.3f, want 1.9–2.0: both bursts pass across the edge", row.Overshoot)
			}
		case sluice.SlidingWindow:
			if row.Overshoot >= 2 {
				t.Errorf("sliding_window overshoot %.3f, want < 2", row.Overshoot)
			}
		default:
			if row.Overshoot > 1 {
				t.Errorf("%s overshoot %.3f, want ≤ 1", row.Variant, row.Overshoot)
			}
		}
	}
}

func checkNodes(t *testing.T, store string) {
	const n = 4
	r := run(t, Nodes, Options{Store: store, Nodes: n})
	naive, shared := r.Rows[0], r.Rows[1]
	if !naive.Naive || naive.Overshoot < n-0.1 || naive.Overshoot > n {
		t.Errorf("per-node counters: overshoot %.3f, want %v–%v (one limit per node)", naive.Overshoot, n-0.1, n)
	}
	if shared.Overshoot > 1 {
		t.Errorf("shared store: overshoot %.3f, want ≤ 1", shared.Overshoot)
	}
}

func checkStaleCache(t *testing.T, store string) {
	r := run(t, StaleCache, Options{Store: store})
	var naive []Row
	for _, row := range r.Rows {
		if row.Naive {
			naive = append(naive, row)
		}
	}
	if len(naive) < 3 || naive[0].Sync != 0 {
		t.Fatalf("want the default sweep starting at S=0, got %d naive rows", len(naive))
	}
	for i := 1; i < len(naive); i++ {
		if naive[i].Overshoot < naive[i-1].Overshoot {
			t.Errorf("overshoot fell from %.3f at S=%v to %.3f at S=%v", naive[i-1].Overshoot, naive[i-1].Sync, naive[i].Overshoot, naive[i].Sync)
		}
	}
	if last, first := naive[len(naive)-1], naive[1]; last.Overshoot <= first.Overshoot {
		t.Errorf("overshoot at S=%v (%.3f) not above S=%v (%.3f)", last.Sync, last.Overshoot, first.Sync, first.Overshoot)
	}
	if atomic := r.Rows[len(r.Rows)-1]; atomic.Naive || atomic.Overshoot > 1 {
		t.Errorf("atomic store: overshoot %.3f, want ≤ 1", atomic.Overshoot)
	}
}

// checkRace retries: the naive overshoot depends on the scheduler, so one
// run may by chance serialize; several in a row will not.
func checkRace(t *testing.T, store string) {
	o := Options{Store: store, Nodes: 8, Limit: 50, Rounds: 3}
	for try := 1; ; try++ {
		r := run(t, Race, o)
		naive, atomic := r.Rows[0], r.Rows[1]
		if atomic.Overshoot > 1 || atomic.MaxInSpan != o.Limit || atomic.Admitted != o.Limit*int64(o.Rounds) {
			t.Fatalf("sluice admitted %d (at most %d in a round), want exactly L = %d per round", atomic.Admitted, atomic.MaxInSpan, o.Limit)
		}
		if naive.Overshoot > 1 {
			return
		}
		if try == 5 {
			t.Fatalf("naive GET/SET never overshot in %d runs (last %.3f)", try, naive.Overshoot)
		}
	}
}

func checkSkew(t *testing.T, store string, o Options) {
	o.Store = store
	r := run(t, Skew, o)
	naive, atomic := r.Rows[0], r.Rows[1]
	if naive.Overshoot <= 1 {
		t.Errorf("naive windows from skewed clocks: overshoot %.3f, want > 1", naive.Overshoot)
	}
	if atomic.Overshoot > 1 {
		t.Errorf("one time source: overshoot %.3f, want ≤ 1 (≤ L per aligned window)", atomic.Overshoot)
	}
}

func checkAccuracy(t *testing.T, store string, o Options) {
	o.Store = store
	r := run(t, Accuracy, o)
	log, win := r.Rows[0], r.Rows[1]
	if log.Overshoot > 1 || *log.DecisionWronglyAllowedPct != 0 || *log.DecisionWronglyDeniedPct != 0 {
		t.Errorf("sliding_log: overshoot %.3f, decision errors %v%% / %v%%; want ≤ 1 and none",
			log.Overshoot, *log.DecisionWronglyAllowedPct, *log.DecisionWronglyDeniedPct)
	}
	if sum := *win.WronglyAllowedPct + *win.WronglyDeniedPct; sum <= 0 || sum >= 1 {
		t.Errorf("sliding_window wrongly allowed+denied %.4f%%, want above 0 and below 1%%", sum)
	}
	t.Logf("sliding_window: %.4f%% wrongly allowed, %.4f%% wrongly denied (decisions: %.4f%% / %.4f%%)",
		*win.WronglyAllowedPct, *win.WronglyDeniedPct, *win.DecisionWronglyAllowedPct, *win.DecisionWronglyDeniedPct)
}

func TestBoundary(t *testing.T)   { checkBoundary(t, "") }
func TestNodes(t *testing.T)      { checkNodes(t, "") }
func TestStaleCache(t *testing.T) { checkStaleCache(t, "") }
func TestRace(t *testing.T)       { checkRace(t, "") }
func TestSkew(t *testing.T)       { checkSkew(t, "", Options{}) }
func TestAccuracy(t *testing.T)   { checkAccuracy(t, "", Options{}) }

// TestDeterministic: the virtual-time scenarios give the same numbers on
// every run.
func TestDeterministic(t *testing.T) {
	for _, s := range []string{Boundary, Nodes, StaleCache, Skew, Accuracy} {
		o := Options{Sources: 100}
		a, b := run(t, s, o), run(t, s, o)
		for i := range a.Rows {
			ra, rb := a.Rows[i], b.Rows[i]
			if ra.Admitted != rb.Admitted || ra.MaxInSpan != rb.MaxInSpan {
				t.Errorf("%s %s: %d/%d then %d/%d", s, ra.Variant, ra.Admitted, ra.MaxInSpan, rb.Admitted, rb.MaxInSpan)
			}
		}
	}
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		scenario string
		o        Options
	}{
		{"nope", Options{}},
		{Boundary, Options{Store: "etcd://x"}},
		{Boundary, Options{Nodes: -1}},
		{Skew, Options{Skew: 600 * time.Millisecond}}, // ≥ P/2
		{StaleCache, Options{Sync: []time.Duration{-1}}},
	} {
		if _, err := Run(ctx, c.scenario, c.o); err == nil {
			t.Errorf("Run(%q, %+v): no error", c.scenario, c.o)
		}
	}
}
