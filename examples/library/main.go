package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

func main() {
	store := memory.New() // in-process; see redisstore for many nodes
	perUser, _ := sluice.New(store, sluice.Policy{
		Name: "per-user", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second,
	})
	global, _ := sluice.New(store, sluice.Policy{
		Name: "global", Algorithm: sluice.SlidingWindow, Limit: 1000, Period: time.Minute,
	})

	ctx := context.Background()
	for i := 0; i < 7; i++ {
		res, err := perUser.Allow(ctx, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed=%v remaining=%d retry after %v\n",
			i+1, res.Allowed, res.Remaining, res.RetryAfter)
	}

	// Both limits or neither: a denial consumes nothing on either.
	results, err := sluice.AllowAll(ctx,
		sluice.Check{Limiter: perUser, Key: "bob", Cost: 1},
		sluice.Check{Limiter: global, Key: "all", Cost: 1},
	)
	if err != nil {
		panic(err)
	}
	fmt.Println("bob allowed:", results[0].Allowed)
}
