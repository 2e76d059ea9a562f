package lab

import (
	"path/filepath"
	"testing"
)

// On the memory store: charging after the response stays within the
// documented worst case of check, then charge, which the naive
// charge-what-fits exceeds; a killed node's slots come back after their
// lease and a counter's never do.
func TestUsage(t *testing.T) { checkUsage(t, "memory://") }

func checkUsage(t *testing.T, store string) *Report {
	r := run(t, Usage, Options{Store: store})
	if len(r.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(r.Rows))
	}
	naive, charge := r.Rows[0], r.Rows[1]
	for _, row := range r.Rows[:2] {
		t.Logf("%s: used %d charged %d in-flight bound %d", row.Variant, *row.Used, *row.Charged, *row.InFlightBound)
	}
	if charge.MaxInSpan > *charge.InFlightBound || charge.Naive {
		t.Errorf("Limiter.Charge: %d used in a window, above the documented L + N·largest cost − 1 = %d", charge.MaxInSpan, *charge.InFlightBound)
	}
	if *charge.Charged != *charge.Used {
		t.Errorf("Limiter.Charge: charged %d of %d used, want every unit", *charge.Charged, *charge.Used)
	}
	if !naive.Naive || naive.MaxInSpan <= *naive.InFlightBound || *naive.Charged >= *naive.Used {
		t.Errorf("check, then charge what fits: %d used in a window (bound %d), charged %d of %d; want above the bound, and less charged than used",
			naive.MaxInSpan, *naive.InFlightBound, *naive.Charged, *naive.Used)
	}
	counter, slots := r.Rows[2], r.Rows[3]
	for _, row := range r.Rows[2:] {
		t.Logf("%s: leaked %d of %d", row.Variant, *row.LeakedSlots, row.Bound)
		if row.Overshoot > 1 {
			t.Errorf("%s: %d in flight, above L = %d", row.Variant, row.MaxInSpan, row.Bound)
		}
	}
	if !counter.Naive || *counter.LeakedSlots == 0 {
		t.Errorf("counter: leaked %d slots after the killed node's lease, want the slots it held", *counter.LeakedSlots)
	}
	if slots.Naive || *slots.LeakedSlots != 0 || slots.MaxInSpan != slots.Bound {
		t.Errorf("slots with a lease: leaked %d, most in flight %d of %d; want 0 leaked and all L in use", *slots.LeakedSlots, slots.MaxInSpan, slots.Bound)
	}
	return r
}

// The usage figure draws: one panel per half of the scenario.
func TestUsagePlot(t *testing.T) {
	r := run(t, Usage, Options{Nodes: 2, Windows: 3})
	if err := r.Plot(filepath.Join(t.TempDir(), "usage.png")); err != nil {
		t.Fatal(err)
	}
}
