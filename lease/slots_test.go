package lease_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// Concurrency passes through to the remote store: its slots are exactly the
// remote's.
func TestSlots(t *testing.T) {
	storetest.RunSlots(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		m := newMemory(clock)
		s := lease.New(m, lease.WithClock(clock))
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, TTL: m.TTL}
	})
	p := sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: 3, Period: time.Second}
	if b := lease.New(newMemory(storetest.NewClock(storetest.Epoch))).Bound(&p); b != 1 {
		t.Errorf("Bound of a concurrency policy = %v, want 1", b)
	}
}
