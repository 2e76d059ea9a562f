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

// The compact part decides as the exact part does: the whole suite, with every
// state it can hold exactly kept there (a sliding log of several entries
// moves to the exact part). TTL is left out: a compact state's slot is kept up
// to a period longer than its ResetAfter.
func TestConformanceCompact(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		return storetest.Harness{Store: memory.NewCompactFirst(memory.WithClock(clock))}
	})
}
