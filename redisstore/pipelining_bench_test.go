package redisstore_test

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// benchTimeout bounds a benchmark's calls: on a loaded machine the store's
// default (100ms) failed a lone caller's run now and then, which measured the
// machine's stalls, not the client.
const benchTimeout = 5 * time.Second

// BenchmarkPipelining: what Open's AlwaysPipelining costs. "always" is Open
// (every connection has a reader of its own, which notices at once when Redis
// closes it, so no decision is sent down a dead connection after a restart);
// "sync" is New on a rueidis client with its default, where a connection
// used by one call at a time is written and read by the caller. Each side
// runs one goroutine (median and p99 in µs) and 64 (decisions/s), on its own
// redis-server. See docs/benchmarks.md.
func BenchmarkPipelining(b *testing.B) {
	for _, side := range []struct {
		name string
		open func(b *testing.B, url string) *redisstore.Store
	}{
		{"always", func(b *testing.B, url string) *redisstore.Store {
			st, err := redisstore.Open(url, redisstore.WithTimeout(benchTimeout))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"sync", func(b *testing.B, url string) *redisstore.Store {
			return redisstore.New(newClient(b, url), redisstore.WithTimeout(benchTimeout))
		}},
	} {
		for _, par := range []int{1, benchConcurrency} {
			b.Run(side.name+"/goroutines="+strconv.Itoa(par), func(b *testing.B) {
				srv := redistest.Start(b)
				l, err := sluice.New(side.open(b, srv.URL()), benchPolicy)
				if err != nil {
					b.Fatal(err)
				}
				decide := func(ctx context.Context, key string) (bool, error) {
					r, err := l.AllowN(ctx, key, 1)
					return r.Allowed, err
				}
				warm(b, decide, benchKeyNames)
				if par == 1 {
					latencyLoop(b, decide)
				} else {
					parallelLoop(b, decide)
				}
			})
		}
	}
}

// latencyLoop makes b.N decisions one at a time and reports their median and
// 99th percentile in µs.
func latencyLoop(b *testing.B, decide decideFunc) {
	ctx := context.Background()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := decide(ctx, benchKeyNames[i%benchKeys]); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(durs)
	q := func(p float64) float64 {
		return float64(durs[int(p*float64(len(durs)-1))]) / float64(time.Microsecond)
	}
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// parallelLoop makes b.N decisions from about 64 goroutines and reports
// decisions/s.
func parallelLoop(b *testing.B, decide decideFunc) {
	ctx := context.Background()
	b.SetParallelism(max(1, (benchConcurrency+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := decide(ctx, benchKeyNames[i%benchKeys]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
