package lease_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// Demand boards pass through to the remote store, which every node shares.
func TestBoard(t *testing.T) {
	storetest.RunBoard(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		m := newMemory(clock)
		s := lease.New(m, lease.WithClock(clock))
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, TTL: m.TTL}
	})
}
