package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// BenchmarkLogLength: Redis CPU per decision of the sliding log as a function
// of the log's length, next to GCRA in the same harness. 64 goroutines, each
// on its own key with its own client clock that moves one period/len per
// decision, so every key's log holds len entries and every decision admits,
// drops the oldest entry and appends one (the limit, 2·len, never binds).
// Reports redis-cpu-µs/op: the server's used_cpu_user+used_cpu_sys over the
// timed loop (INFO cpu), divided by the decisions.
//
//	go test -run '^$' -bench BenchmarkLogLength -benchtime 20000x ./redisstore/
func BenchmarkLogLength(b *testing.B) {
	cases := []struct {
		name string
		alg  sluice.Algorithm
		n    int
	}{{"gcra", sluice.GCRA, 1}}
	for _, n := range []int{1, 10, 100, 1000, 10000} {
		cases = append(cases, struct {
			name string
			alg  sluice.Algorithm
			n    int
		}{"sliding_log/len=" + strconv.Itoa(n), sluice.SlidingLog, n})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			c := newClient(b, srv.URL())
			p := &sluice.Policy{Name: "log", Algorithm: tc.alg, Limit: int64(2 * tc.n), Period: time.Second}
			step := p.Period / time.Duration(tc.n)
			b.SetParallelism(max(1, (benchConcurrency+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
			type lane struct {
				s     *redisstore.Store
				clock *storetest.Clock
				key   string
			}
			lanes := make([]lane, runtime.GOMAXPROCS(0)*max(1, (benchConcurrency+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
			ctx := context.Background()
			var failed atomic.Bool
			decide := func(l lane) {
				r, err := l.s.Decide(ctx, sluice.Request{Policy: p, Key: l.key, Cost: 1})
				if (err != nil || !r.Allowed) && !failed.Swap(true) {
					b.Errorf("key %s: %+v, %v", l.key, r, err) // Fatal is for the benchmark's goroutine only
				}
				l.clock.Advance(step)
			}
			done := make(chan struct{}, len(lanes))
			for i := range lanes {
				clock := storetest.NewClock(storetest.Epoch)
				lanes[i] = lane{redisstore.New(c, redisstore.WithClock(clock), redisstore.WithTimeout(10*time.Second)), clock, "k" + strconv.Itoa(i)}
				go func(l lane) { // fill the log to its steady length
					for range tc.n {
						decide(l)
					}
					done <- struct{}{}
				}(lanes[i])
			}
			for range lanes {
				<-done
			}
			var next atomic.Int64
			cpu0 := redisCPU(b, srv)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				l := lanes[next.Add(1)-1]
				for pb.Next() {
					decide(l)
				}
			})
			b.StopTimer()
			b.ReportMetric((redisCPU(b, srv)-cpu0)*1e6/float64(b.N), "redis-cpu-µs/op")
		})
	}
}

// redisCPU is the server's CPU time so far, in seconds.
func redisCPU(b *testing.B, srv *redistest.Server) float64 {
	cpu, err := srv.CPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}
