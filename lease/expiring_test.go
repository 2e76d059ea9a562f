package lease

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExpiringOrder: the heap pops leases by expiry, whatever the order
// they were pushed in, interleaved with pops.
func TestExpiringOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h expiring
	var want []int64
	for range 2000 {
		if len(h) > 0 && rng.IntN(3) == 0 {
			slices.Sort(want)
			if at := h.pop().at; at != want[0] {
				t.Fatalf("popped %d, want the earliest %d", at, want[0])
			}
			want = want[1:]
			continue
		}
		at := rng.Int64N(500)
		h.push(expiry{at: at})
		want = append(want, at)
	}
	slices.Sort(want)
	for i := range want {
		if at := h.pop().at; at != want[i] {
			t.Fatalf("draining: popped %d, want %d", at, want[i])
		}
	}
	if len(h) != 0 {
		t.Fatalf("%d entries left after draining", len(h))
	}
}
