package lab

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// checkHybrid: leases stay within their proven bound, call the store rarely
// and use the limit; the synced counters overshoot; the exact store does not.
func checkHybrid(t *testing.T, o Options) *Report {
	t.Helper()
	r := run(t, Hybrid, o)
	var leases, synced int
	for _, row := range r.Rows {
		switch {
		case row.ProvenBound != nil:
			leases++
			if row.Overshoot > *row.ProvenBound {
				t.Errorf("%s: overshoot %.4f > proven bound %.4f", row.Variant, row.Overshoot, *row.ProvenBound)
			}
			if *row.Utilization < 0.9 {
				t.Errorf("%s: utilization %.3f < 0.9", row.Variant, *row.Utilization)
			}
			if *row.StoreCallsPerDecision > 0.05 {
				t.Errorf("%s: %.4f store calls per decision > 0.05", row.Variant, *row.StoreCallsPerDecision)
			}
		case row.Naive:
			synced++
			if row.Overshoot <= 1 {
				t.Errorf("%s: overshoot %.4f, expected above 1", row.Variant, row.Overshoot)
			}
		default:
			if row.Overshoot > 1 || *row.StoreCallsPerDecision != 1 {
				t.Errorf("%s: overshoot %.4f, %.4f store calls per decision; want ≤ 1 and 1", row.Variant, row.Overshoot, *row.StoreCallsPerDecision)
			}
		}
	}
	if leases != 2 || synced != 1 || len(r.Rows) != 5 {
		t.Fatalf("rows %+v: want two lease rows, one synced-counters row and two exact ones", r.Rows)
	}
	return r
}

func TestHybrid(t *testing.T) {
	// Store calls per decision fall as each node's rate × TTL grows: at
	// these limits every node takes 30 or more units per TTL.
	checkHybrid(t, Options{Nodes: 4, Limit: 5000, Windows: 2})
	checkHybrid(t, Options{Nodes: 16, Limit: 10000, Windows: 2})
	var b strings.Builder
	if err := run(t, Hybrid, Options{}).WriteTable(&b); err != nil || !strings.Contains(b.String(), "store_calls_per_decision") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
}

// TestHybridRedis runs hybrid on a real redis-server; virtual time makes it
// give exactly the numbers of the memory store.
func TestHybridRedis(t *testing.T) {
	url := redistest.Start(t).URL()
	o := Options{Nodes: 4, Limit: 2000, Windows: 2}
	m := checkHybrid(t, o)
	o.Store = url
	r := checkHybrid(t, o)
	for i := range m.Rows {
		// A decision may start both a renewal and the sweep's releases in
		// the background, and the two reach the store in either order: the
		// calls agree to two per node, everything else exactly.
		mc, rc := m.Rows[i].StoreCallsPerDecision, r.Rows[i].StoreCallsPerDecision
		if mc != nil && rc != nil && math.Abs(*rc-*mc)*float64(m.Rows[i].Sent) <= float64(2*o.Nodes)+0.5 {
			r.Rows[i].StoreCallsPerDecision = mc
		}
		if !reflect.DeepEqual(m.Rows[i], r.Rows[i]) {
			mj, _ := json.Marshal(m.Rows[i])
			rj, _ := json.Marshal(r.Rows[i])
			t.Errorf("row %d: Redis and memory differ:\nRedis  %s\nmemory %s", i, rj, mj)
		}
	}
}
