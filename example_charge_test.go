package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// A token budget: each request is checked before the work with a peek,
// which is denied once nothing is left, and charged afterwards with the
// tokens it really used, even beyond the budget. The key then owes the
// excess, and is denied until the window that holds it ends.
func ExampleLimiter_Charge() {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch) // moves only when told to, for the example
	tokens, err := sluice.New(memory.New(memory.WithClock(clock)), sluice.Policy{
		Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Minute,
	})
	if err != nil {
		panic(err)
	}
	for _, used := range []int64{400, 700, 300} {
		check, err := tokens.AllowN(ctx, "alice", 0) // before the work
		if err != nil {
			panic(err)
		}
		if !check.Allowed {
			fmt.Printf("denied, retry in %v\n", check.RetryAfter)
			continue
		}
		res, err := tokens.Charge(ctx, "alice", used) // after it: what it cost
		if err != nil {
			panic(err)
		}
		fmt.Printf("used %d tokens: %d left\n", used, res.Remaining)
		clock.Advance(10 * time.Second)
	}
	// Output:
	// used 400 tokens: 600 left
	// used 700 tokens: -100 left
	// denied, retry in 40s
}
