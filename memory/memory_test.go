package memory_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		s := memory.New(memory.WithClock(clock))
		return storetest.Harness{Store: s, TTL: s.TTL}
	})
}
