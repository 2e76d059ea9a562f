package sluice_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// CheckRequest takes a shortcut for the common request; over every algorithm
// and a grid of limits, bursts, keys and costs around the edges its answer is
// still the documented one: ErrInvalidKey for an empty or too long key,
// ErrInvalidCost for a negative cost, ErrExceedsCapacity above Capacity().
func TestCheckRequestEdges(t *testing.T) {
	keys := []string{"", "k", strings.Repeat("k", sluice.MaxKeyLen), strings.Repeat("k", sluice.MaxKeyLen+1)}
	checked := 0
	for _, a := range sluice.Algorithms {
		for _, limit := range []int64{1, 2, 7, 100} {
			for _, burst := range []int64{0, 1, 3, 7, 150} {
				p := sluice.Policy{Name: "p", Algorithm: a, Limit: limit, Period: time.Second, Burst: burst}
				if p.Validate() != nil {
					continue // a burst on a window algorithm
				}
				for _, key := range keys {
					for cost := int64(-2); cost <= 160; cost++ {
						var want error
						switch {
						case key == "" || len(key) > sluice.MaxKeyLen:
							want = sluice.ErrInvalidKey
						case cost < 0:
							want = sluice.ErrInvalidCost
						case cost > p.Capacity():
							want = sluice.ErrExceedsCapacity
						}
						err := sluice.CheckRequest(sluice.Request{Policy: &p, Key: key, Cost: cost})
						if want == nil && err != nil || want != nil && !errors.Is(err, want) {
							t.Fatalf("%+v key of %d bytes, cost %d: got %v, want %v", p, len(key), cost, err, want)
						}
						checked++
					}
				}
			}
		}
	}
	if checked < 10_000 {
		t.Fatalf("checked only %d requests", checked)
	}
}
