package lease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkHotKey: one key taking all the traffic from parallel callers, on
// Redis directly and through leases — the best case for leases.
func BenchmarkHotKey(b *testing.B) {
	srv := redistest.Start(b)
	p := sluice.Policy{Name: "hot", Algorithm: sluice.GCRA, Limit: 1_000_000_000, Period: time.Second}
	run := func(b *testing.B, st sluice.Store) {
		l, err := sluice.New(st, p)
		if err != nil {
			b.Fatal(err)
		}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Allow(context.Background(), "k"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	open := func(b *testing.B) *redisstore.Store {
		rs, err := redisstore.Open(srv.URL(), redisstore.WithPrefix(b.Name()+":"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rs.Close() })
		return rs
	}
	b.Run("redis", func(b *testing.B) { run(b, open(b)) })
	b.Run("lease", func(b *testing.B) {
		ls := lease.New(open(b))
		run(b, ls)
		st := ls.Stats()
		b.ReportMetric(float64(st.StoreCalls)/float64(st.Decisions), "calls/decision")
		if err := ls.Close(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkLocal: the lease layer's own cost, over the memory store (so no
// network), against the memory store alone: one hot key, and 10,000 keys.
func BenchmarkLocal(b *testing.B) {
	p := sluice.Policy{Name: "local", Algorithm: sluice.GCRA, Limit: 1_000_000_000, Period: time.Second}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	run := func(b *testing.B, st sluice.Store, n int) {
		l, err := sluice.New(st, p)
		if err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(7919))
			for pb.Next() {
				i++
				if _, err := l.Allow(context.Background(), keys[i%n]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	for _, n := range []int{1, len(keys)} {
		b.Run(fmt.Sprintf("memory/keys=%d", n), func(b *testing.B) { run(b, memory.New(), n) })
		b.Run(fmt.Sprintf("lease/keys=%d", n), func(b *testing.B) {
			ls := lease.New(memory.New())
			run(b, ls, n)
			st := ls.Stats()
			b.ReportMetric(float64(st.StoreCalls)/float64(st.Decisions), "calls/decision")
		})
	}
}

// BenchmarkStack: one hot key through leases and a fail policy, stacked as
// the service does (leases over the fail policy, which then sees only the
// store calls) and the other way round (every decision through the fail
// policy's timeout and breaker).
func BenchmarkStack(b *testing.B) {
	p := sluice.Policy{Name: "stack", Algorithm: sluice.GCRA, Limit: 1_000_000_000, Period: time.Second}
	run := func(b *testing.B, st sluice.Store) {
		l, err := sluice.New(st, p)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Allow(context.Background(), "k"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("lease-over-failover", func(b *testing.B) { run(b, lease.New(failover.New(memory.New()))) })
	b.Run("failover-over-lease", func(b *testing.B) { run(b, failover.New(lease.New(memory.New()))) })
}

// BenchmarkColdKeys: the lease layer's own cost on keys it never leases —
// 1,000,000 keys, each asked about once — over the memory store, against
// the memory store alone. A cold key's decision should cost about what the
// store's does: one shard lookup, no allocation, no store call but its own.
//
//	go test -run XXX -bench ColdKeys -count 5 ./lease/
func BenchmarkColdKeys(b *testing.B) {
	p := sluice.Policy{Name: "cold", Algorithm: sluice.GCRA, Limit: 1_000_000_000, Period: time.Second}
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	run := func(b *testing.B, st sluice.Store) {
		l, err := sluice.New(st, p)
		if err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)) * 7919
			for pb.Next() {
				i += 104729 // a prime: every key once before any twice
				if _, err := l.Allow(context.Background(), keys[i%len(keys)]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("memory", func(b *testing.B) { run(b, memory.New()) })
	b.Run("lease", func(b *testing.B) { run(b, lease.New(memory.New())) })
}
