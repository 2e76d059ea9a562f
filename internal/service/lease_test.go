package service

import (
	"testing"

	"github.com/sluicehq/sluice/internal/config"
)

// TestSameStoreLease: a reload of an unchanged store.lease is no store
// change (each load allocates the section afresh); a changed one is.
func TestSameStoreLease(t *testing.T) {
	a := config.Store{URL: "redis://r:6379", Lease: &config.Lease{TTL: 1}}
	b := config.Store{URL: "redis://r:6379", Lease: &config.Lease{TTL: 1}}
	if !sameStore(a, b) {
		t.Error("equal lease sections: a store change")
	}
	for _, l := range []*config.Lease{nil, {TTL: 2}, {Off: true}} {
		b.Lease = l
		if sameStore(a, b) {
			t.Errorf("lease %+v against %+v: no store change", l, a.Lease)
		}
	}
}
