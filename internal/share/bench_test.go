package share

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// demands returns n tenants' board entries on one node, one heavy.
func demands(n int) []sluice.Demand {
	out := make([]sluice.Demand, n)
	for i := range out {
		out[i] = sluice.Demand{Member: member("node", 1, fmt.Sprint("tenant-", i)), Value: float64(i%100) / 10}
	}
	out[0].Value = 1e9
	return out
}

// The shares of 1 and 100,000 tenants: the table a node builds from the
// board every interval.
func BenchmarkAllocate(b *testing.B) {
	p := sluice.Policy{Name: "fair", Algorithm: sluice.GCRA, Limit: 100_000, Period: time.Second}
	for _, n := range []int{1, 100_000} {
		ds := demands(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				allocate(&p, ds)
			}
		})
	}
}

// A decision's work: count the tenant's demand, look its limit up, among 10
// or 100,000 tenants.
func BenchmarkLimit(b *testing.B) {
	p := sluice.Policy{Name: "fair", Algorithm: sluice.GCRA, Limit: 100_000, Period: time.Second}
	for _, n := range []int{10, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			clock := storetest.NewClock(storetest.Epoch)
			s := New(memory.New(memory.WithClock(clock)), WithClock(clock))
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprint("tenant-", i)
				s.Limit(&p, time.Second, keys[i], 1, 1)
			}
			clock.Advance(time.Second)
			s.Limit(&p, time.Second, keys[0], 1, 1)
			s.Wait()
			i := 0
			for b.Loop() {
				s.Limit(&p, time.Second, keys[i%n], 1, 1)
				i++
			}
		})
	}
}

// The memory store's board at 100,000 members: one post and one read.
func BenchmarkMemoryBoard100k(b *testing.B) {
	ctx := context.Background()
	m := memory.New()
	ds := demands(100_000)
	for b.Loop() {
		if err := m.PostDemand(ctx, "b", ds, time.Minute); err != nil {
			b.Fatal(err)
		}
		if _, err := m.ReadDemand(ctx, "b"); err != nil {
			b.Fatal(err)
		}
	}
}
