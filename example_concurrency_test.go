package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// At most two reports render at once for each customer; a request that
// crashes without releasing its slot holds it for a minute at most.
func ExampleLimiter_Acquire() {
	ctx := context.Background()
	lim, err := sluice.New(memory.New(), sluice.Policy{
		Name: "reports", Algorithm: sluice.Concurrency, Limit: 2, Period: time.Minute,
	})
	if err != nil {
		panic(err)
	}
	var held []*sluice.Slot
	for range 3 {
		res, slot, err := lim.Acquire(ctx, "customer-42")
		if err != nil {
			panic(err)
		}
		if !res.Allowed {
			fmt.Printf("busy: %d free, a slot is back within %v\n", res.Remaining, res.RetryAfter.Round(time.Minute))
			continue
		}
		fmt.Printf("rendering: %d free\n", res.Remaining)
		held = append(held, slot)
	}
	released, _ := held[0].Release(ctx) // the first report is done
	fmt.Println("released:", released)
	res, slot, _ := lim.Acquire(ctx, "customer-42")
	fmt.Println("acquired again:", res.Allowed)
	_, _ = slot.Release(ctx)
	// Output:
	// rendering: 1 free
	// rendering: 0 free
	// busy: 0 free, a slot is back within 1m0s
	// released: true
	// acquired again: true
}
