package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// Reading a demand board of 1,000 and 100,000 members from one Redis: what
// each node pays once per share interval.
func BenchmarkBoardRead(b *testing.B) {
	ctx := context.Background()
	s := redisstore.New(newClient(b, redistest.Start(b).URL()), redisstore.WithTimeout(time.Minute))
	for _, n := range []int{1_000, 100_000} {
		board := fmt.Sprint("bench-", n)
		for from := 0; from < n; from += 10_000 {
			var ds []sluice.Demand
			for i := from; i < min(from+10_000, n); i++ {
				ds = append(ds, sluice.Demand{Member: fmt.Sprint("node tenant-", i), Value: float64(i)})
			}
			if err := s.PostDemand(ctx, board, ds, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				got, err := s.ReadDemand(ctx, board)
				if err != nil || len(got) != n {
					b.Fatalf("read %d members, %v", len(got), err)
				}
			}
		})
	}
}
