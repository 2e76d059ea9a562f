package fairshare

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity float64
		claims   []Claim
		spare    bool
		want     []float64
	}{
		{"four streams on 1000/s", 1000, []Claim{{Demand: 100}, {Demand: 200}, {Demand: 600}, {Demand: 2000}}, false, []float64{100, 200, 350, 350}},
		{"order does not matter", 1000, []Claim{{Demand: 2000}, {Demand: 600}, {Demand: 100}, {Demand: 200}}, false, []float64{350, 350, 100, 200}},
		{"one heavy tenant", 100, []Claim{{Demand: 10}, {Demand: 10}, {Demand: 10000}}, false, []float64{10, 10, 80}},
		{"all above their share", 90, []Claim{{Demand: 100}, {Demand: 200}, {Demand: 300}}, false, []float64{30, 30, 30}},
		{"weights", 100, []Claim{{Demand: 1000, Weight: 3}, {Demand: 1000, Weight: 1}}, false, []float64{75, 25}},
		{"weights, the light one satisfied", 100, []Claim{{Demand: 1000, Weight: 3}, {Demand: 10, Weight: 1}}, false, []float64{90, 10}},
		{"under capacity, no spare", 1000, []Claim{{Demand: 100}, {Demand: 200}}, false, []float64{100, 200}},
		{"under capacity, spare by weight", 1000, []Claim{{Demand: 100}, {Demand: 200, Weight: 3}}, true, []float64{100 + 175, 200 + 525}},
		{"zero and negative demand", 10, []Claim{{Demand: 0}, {Demand: -5}, {Demand: 100}}, false, []float64{0, 0, 10}},
		{"no capacity", 0, []Claim{{Demand: 5}}, true, []float64{0}},
		{"one tenant", 50, []Claim{{Demand: 80}}, true, []float64{50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Allocate(tc.capacity, tc.claims, tc.spare)
			for i := range tc.want {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("Allocate(%v, %+v, %v) = %v, want %v", tc.capacity, tc.claims, tc.spare, got, tc.want)
				}
			}
		})
	}
}

// TestAllocateProperties checks the definition of weighted max-min fairness
// on random claims: no share above its demand; the shares use the capacity
// (all of it with spare, or all the demand if less); and no claimant short of
// its demand could gain without taking from one whose share is, by weight,
// no larger (a claimant short of its demand has the highest share per
// weight of all).
func TestAllocateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + r.IntN(20)
		claims := make([]Claim, n)
		var demand float64
		for i := range claims {
			claims[i] = Claim{Demand: r.Float64() * 100, Weight: 0.5 + r.Float64()*4}
			demand += claims[i].Demand
		}
		capacity := r.Float64() * 150 * float64(n) / 2
		spare := r.IntN(2) == 0
		shares := Allocate(capacity, claims, spare)
		var sum, topLevel float64
		for i, s := range shares {
			sum += s
			if !spare && s > claims[i].Demand+1e-9 {
				t.Fatalf("share %v above demand %v", s, claims[i].Demand)
			}
			topLevel = max(topLevel, s/claims[i].Weight)
		}
		want := min(capacity, demand)
		if spare {
			want = capacity
		}
		if math.Abs(sum-want) > 1e-6*max(1, want) {
			t.Fatalf("shares sum to %v, want %v (capacity %v, demand %v, spare %v)", sum, want, capacity, demand, spare)
		}
		for i, s := range shares {
			if s < claims[i].Demand-1e-9 && s/claims[i].Weight < topLevel-1e-6 {
				t.Fatalf("claim %d short of its demand (%v < %v) at %v per weight, below the top %v", i, s, claims[i].Demand, s/claims[i].Weight, topLevel)
			}
		}
	}
}

func BenchmarkAllocate100k(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	claims := make([]Claim, 100_000)
	for i := range claims {
		claims[i] = Claim{Demand: r.ExpFloat64() * 10}
	}
	for b.Loop() {
		Allocate(500_000, claims, true)
	}
}
