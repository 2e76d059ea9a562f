package rlqs

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/storetest"
)

// apiBucket is the bucket id of the native policy api's key k.
func apiBucket(k string) map[string]string { return map[string]string{"policy": "api", "key": k} }

// demands are the four Envoys' offered rates on api (1000 a second) and
// the max-min fair shares of them: the two small demands are met, the two
// large ones split the rest.
var (
	demands = []float64{100, 200, 600, 2000}
	shares  = []float64{100, 200, 350, 350}
)

// answered runs f, which sends one report from e, and waits for an answer.
func answered(t *testing.T, e *envoy, f func()) {
	t.Helper()
	before := e.messages()
	f()
	testwait.Until(t, "a report answered", func() bool { return e.messages() > before })
}

// converge starts the Envoys' traffic on one bucket and lets two report
// intervals pass, each Envoy reporting once in each.
func converge(t *testing.T, envoys []*envoy, id map[string]string, rates []float64) {
	t.Helper()
	for i, e := range envoys {
		answered(t, e, func() { e.start(id, rates[i]) })
	}
	for range 2 {
		for _, e := range envoys {
			answered(t, e, e.tick)
		}
	}
}

// waitShares waits until the Envoys' active assignments on id are want
// (each within 1%) and checks that they sum to at most 1.01 times limit.
func waitShares(t *testing.T, envoys []*envoy, id map[string]string, want []float64, limit float64) {
	t.Helper()
	testwait.UntilSaw(t, fmt.Sprintf("assignments %v", want), func() (bool, string) {
		got := make([]float64, len(envoys))
		ok := true
		for i, e := range envoys {
			got[i] = e.assigned(id)
			ok = ok && math.Abs(got[i]-want[i]) <= 0.01*want[i]
		}
		return ok, fmt.Sprint(got)
	})
	var sum float64
	for _, e := range envoys {
		sum += e.assigned(id)
	}
	if sum > 1.01*limit {
		t.Errorf("assignments sum to %v, over 1.01 × %v", sum, limit)
	}
	t.Logf("assigned %v (sum %v of %v)", func() []float64 {
		got := make([]float64, len(envoys))
		for i, e := range envoys {
			got[i] = e.assigned(id)
		}
		return got
	}(), sum, limit)
}

// TestFairShares: four Envoys offering 100, 200, 600 and 2000 requests a
// second on a limit of 1000 are assigned 100, 200, 350 and 350 within two
// report intervals.
func TestFairShares(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)))
	envoys := make([]*envoy, len(demands))
	for i := range envoys {
		envoys[i] = dial(t, n, "edge")
	}
	converge(t, envoys, apiBucket("acme"), demands)
	waitShares(t, envoys, apiBucket("acme"), shares, 1000)
}

// TestFairSharesTwoNodes: the same, the Envoys spread over two nodes that
// share one Board.
func TestFairSharesTwoNodes(t *testing.T) {
	clock := storetest.NewClock(time.Unix(1e9, 0))
	board := NewMemoryBoard(clock)
	a := startNode(t, clock, WithBoard(board), WithNodeID("a"))
	b := startNode(t, clock, WithBoard(board), WithNodeID("b"))
	envoys := []*envoy{dial(t, a, "edge"), dial(t, b, "edge"), dial(t, a, "edge"), dial(t, b, "edge")}
	converge(t, envoys, apiBucket("acme"), demands)
	waitShares(t, envoys, apiBucket("acme"), shares, 1000)
}

// TestDemandShiftReassigns: when one Envoy's demand falls, the others are
// pushed their larger shares without reporting themselves; when its stream
// closes, its share is freed for them.
func TestDemandShiftReassigns(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)))
	envoys := make([]*envoy, len(demands))
	for i := range envoys {
		envoys[i] = dial(t, n, "edge")
	}
	id := apiBucket("acme")
	converge(t, envoys, id, demands)
	waitShares(t, envoys, id, shares, 1000)

	// 100+200+600+50 = 950: every demand met, the 50 left spread evenly.
	envoys[3].setRate(id, 50)
	answered(t, envoys[3], envoys[3].tick)
	waitShares(t, envoys, id, []float64{112, 212, 612, 62}, 1000)

	// Closed: 100+200+600 = 900, the 100 left spread over three.
	envoys[3].close()
	waitShares(t, envoys[:3], id, []float64{133, 233, 633}, 1000)
}
