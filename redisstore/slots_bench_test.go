package redisstore_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkAcquireRelease: Redis CPU for one acquisition and its release
// (two script calls) on 10,000 keys, each holding held other slots, next to
// one gcra decision on the same keys in the same run, as the store makes it
// (gcra-decide: decisions queued meanwhile share a call) and alone
// (gcra-alone: a store per goroutine, so every decision is a call of its
// own); 64 goroutines on one fresh redis-server per case, on Redis TIME. Reports redis-cpu-µs/op (INFO
// cpu's used_cpu_user+used_cpu_sys over the timed loop, divided by the
// operations), as scripts/redis-cpu.sh measures a decision.
//
//	go test -run '^$' -bench BenchmarkAcquireRelease -benchtime 20000x -count 5 ./redisstore/
func BenchmarkAcquireRelease(b *testing.B) {
	for _, tc := range []struct {
		name string
		alg  sluice.Algorithm
		held int
	}{{"gcra-decide", sluice.GCRA, 0}, {"gcra-alone", sluice.GCRA, 0}, {"held=0", sluice.Concurrency, 0}, {"held=10", sluice.Concurrency, 10}} {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			st, err := redisstore.Open(srv.URL(), redisstore.WithTimeout(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			client := newClient(b, srv.URL())
			limit := int64(benchRate)
			if tc.alg == sluice.Concurrency {
				limit = 100
			}
			l, err := sluice.New(st, sluice.Policy{Name: "bench", Algorithm: tc.alg, Limit: limit, Period: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for _, k := range benchKeyNames {
				for range tc.held {
					if _, _, err := l.Acquire(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
			}
			op := func(key string) error {
				if tc.alg != sluice.Concurrency {
					_, err := l.Allow(ctx, key)
					return err
				}
				res, slot, err := l.Acquire(ctx, key)
				if err != nil || !res.Allowed {
					return err
				}
				_, err = slot.Release(ctx)
				return err
			}
			b.SetParallelism(max(1, (benchConcurrency+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
			var next atomic.Int64
			var failed atomic.Bool
			cpu0 := redisCPU(b, srv)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				op := op
				if tc.name == "gcra-alone" {
					own, _ := sluice.New(redisstore.New(client, redisstore.WithTimeout(10*time.Second)), l.Policy())
					op = func(key string) error { _, err := own.Allow(ctx, key); return err }
				}
				for pb.Next() {
					k := benchKeyNames[int(next.Add(1))%len(benchKeyNames)]
					if err := op(k); err != nil && !failed.Swap(true) {
						b.Error(err)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric((redisCPU(b, srv)-cpu0)*1e6/float64(b.N), "redis-cpu-µs/op")
		})
	}
}
