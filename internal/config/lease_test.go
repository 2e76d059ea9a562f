package config

import (
	"strings"
	"testing"
	"time"
)

// TestStoreLease: store.lease parses into Store.Lease; bad values and
// unknown fields are errors naming the setting. (Leases on the memory store
// are refused by service.CheckStore, which knows the URL --store sets.)
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
	} {
		_, err := Parse("c.yaml", []byte(tc.store+policies))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error naming %q", tc.store, err, tc.want)
		}
	}
}

// TestPolicyLease: a policy's lease section parses into Policy.Lease (off or
// its own settings); a TTL that is not positive or exceeds the policy's span,
// a lease on an algorithm that is not leased, and unknown fields are errors
// naming the field (and, for a too long TTL, the bound it would imply).
func TestPolicyLease(t *testing.T) {
	store := y("store:", "  url: redis://r:6379", "  lease: off")
	c, err := Parse("c.yaml", []byte(store+y("policies:",
		"  - {name: own, algorithm: gcra, limit: 100, period: 1s, lease: {ttl: 50ms, max_lease: 10}}",
		"  - {name: off, algorithm: token_bucket, limit: 100, period: 1s, lease: off}",
		"  - {name: none, algorithm: sliding_log, limit: 100, period: 1s}")))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Store.Lease; l == nil || !l.Off {
		t.Errorf("store.lease: off parsed as %+v", l)
	}
	if l := c.Policies["own"].Lease; l == nil || l.Off || l.TTL != 50*time.Millisecond || l.MaxLease != 10 {
		t.Errorf("own lease %+v, want ttl 50ms and max_lease 10", l)
	}
	if l := c.Policies["off"].Lease; l == nil || !l.Off {
		t.Errorf("off lease %+v, want off", l)
	}
	if l := c.Policies["none"].Lease; l != nil {
		t.Errorf("none lease %+v, want nil (the store's)", l)
	}
	for _, tc := range []struct{ policy, want string }{
		{"{name: p, algorithm: gcra, limit: 100, period: 1s, lease: {ttl: 0s}}", "policies[0].lease.ttl: must be positive"},
		{"{name: p, algorithm: gcra, limit: 100, period: 1s, lease: {ttl: 2s}}", "could admit 3.00× the limit"},
		{"{name: p, algorithm: fixed_window, limit: 100, period: 1s, lease: {ttl: 1500ms}}", "must not exceed 1s (the period)"},
		{"{name: p, algorithm: sliding_window, limit: 100, period: 1s, lease: {ttl: 10ms}}", "sliding_window is not leased"},
		{"{name: p, algorithm: gcra, limit: 100, period: 1s, lease: {size: 3}}", "size"},
		{"{name: p, algorithm: gcra, limit: 100, period: 1s, lease: on}", "must be off or a mapping"},
		{"{name: p, algorithm: gcra, limit: 100, period: 1s, lease: {max_lease: 0}}", "policies[0].lease.max_lease"},
	} {
		_, err := Parse("c.yaml", []byte(store+"policies:\n  - "+tc.policy+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.policy, err, tc.want)
		}
	}
	if b := LeaseBound(&c.Policies["own"].Policy, 50*time.Millisecond); b != 1.05 {
		t.Errorf("LeaseBound(gcra 100/s, 50ms) = %v, want 1.05", b)
	}
}
