package lab

import (
	"context"
	"testing"
)

// On the memory store, fair share meets its targets and one global limit
// starves the light tenants.
func TestFairness(t *testing.T) {
	r, err := Run(context.Background(), Fairness, Options{})
	if err != nil {
		t.Fatal(err)
	}
	naive, fair := r.Rows[0], r.Rows[1]
	for _, row := range r.Rows {
		t.Logf("%s: min_share_ratio %.3f utilization %.3f overshoot %.3f heaviest %.3f %+v", row.Variant, *row.MinShareRatio, *row.Utilization, row.Overshoot, *row.HeaviestShare, row.Tenants)
	}
	if *fair.MinShareRatio < 0.99 || *fair.Utilization < 0.98 || fair.Overshoot > 1 {
		t.Errorf("fair share: min_share_ratio %.3f, utilization %.3f, overshoot %.3f; want ≥ 0.99, ≥ 0.98, ≤ 1", *fair.MinShareRatio, *fair.Utilization, fair.Overshoot)
	}
	if *naive.MinShareRatio > 0.5 {
		t.Errorf("one global limit: min_share_ratio %.3f, want the light tenants starved", *naive.MinShareRatio)
	}
}
