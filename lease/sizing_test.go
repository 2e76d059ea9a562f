package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// TestLeaseSizes: a key's first lease is one unit; its second is two TTLs of
// the rate measured on the first (one gap between requests, a noisy
// estimate); later ones are one TTL of the rate measured on the lease before.
func TestLeaseSizes(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	// B·T = 1s, so the TTL is 50ms and the max lease (100,000) caps nothing here.
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1_000_000, Period: time.Second}
	s := lease.New(newMemory(clock), lease.WithClock(clock))
	if ttl := s.TTL(&p); ttl != 50*time.Millisecond {
		t.Fatalf("TTL %v, want 50ms", ttl)
	}
	ctx := context.Background()
	decide := func(at time.Duration) {
		t.Helper()
		clock.Set(storetest.Epoch.Add(at))
		if res, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}); err != nil || !res.Allowed {
			t.Fatalf("at %v: %+v, %v", at, res, err)
		}
	}
	held := func(want int64, what string) {
		t.Helper()
		if got := s.Held(&p, "k"); got != want {
			t.Errorf("%s: holds %d units, want %d", what, got, want)
		}
	}
	decide(0)
	held(0, "first lease (one unit, spent)")
	// One unit in 10ms: two TTLs of it are 10 units, one spent now.
	decide(10 * time.Millisecond)
	held(9, "second lease")
	for at := 15 * time.Millisecond; at <= 55*time.Millisecond; at += 5 * time.Millisecond {
		decide(at)
	}
	held(0, "second lease spent")
	// 10 units in 47ms: one TTL of it is ⌈10·50/47⌉ = 11 units, one spent now.
	decide(57 * time.Millisecond)
	held(10, "third lease")
	if st := s.Stats(); st.StoreCalls != 3 {
		t.Errorf("%d store calls, want 3 (one per lease)", st.StoreCalls)
	}
}
