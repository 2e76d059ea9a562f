package config

import (
	"strings"
	"testing"
	"time"
)

// TestStoreLease: store.lease parses into Store.Lease; bad values, unknown
// fields and leases on the memory store are errors naming the setting.
func TestStoreLease(t *testing.T) {
	policies := "policies:\n  - {name: p, algorithm: gcra, limit: 10, period: 1s}\n"
	c, err := Parse("c.yaml", []byte(y("store:", "  url: redis://r:6379", "  lease:", "    ttl: 20ms", "    max_lease: 50")+policies))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Store.Lease; l == nil || l.TTL != 20*time.Millisecond || l.MaxLease != 50 {
		t.Fatalf("lease %+v, want ttl 20ms and max_lease 50", l)
	}
	c, err = Parse("c.yaml", []byte(y("store:", "  url: redis://r:6379", "  lease: {}")+policies))
	if err != nil || c.Store.Lease == nil || *c.Store.Lease != (Lease{}) {
		t.Fatalf("an empty lease section: %+v %v, want the defaults", c.Store.Lease, err)
	}
	for _, tc := range []struct{ store, want string }{
		{y("store:", "  url: redis://r:6379", "  lease: {ttl: -1s}"), "store.lease.ttl"},
		{y("store:", "  url: redis://r:6379", "  lease: {max_lease: 0}"), "store.lease.max_lease"},
		{y("store:", "  url: redis://r:6379", "  lease: {size: 3}"), "size"},
		{y("store:", "  url: memory://", "  lease: {ttl: 10ms}"), "store.lease"},
		{y("store:", "  lease: {ttl: 10ms}"), "memory store"},
	} {
		_, err := Parse("c.yaml", []byte(tc.store+policies))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error naming %q", tc.store, err, tc.want)
		}
	}
}
