package memory_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func TestReserver(t *testing.T) {
	storetest.RunReserver(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		return storetest.Harness{Store: memory.New(memory.WithClock(clock))}
	})
}
