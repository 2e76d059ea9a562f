package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkSpreadSet: DecideAll sets of two keys on two shards (independent
// redis-servers), 64 goroutines, every set admitted: the cross-shard path's
// dry run and reservations. It reports the script calls Redis served per set
// (FCALL and EVALSHA from INFO commandstats, over both servers), their CPU
// time per set (INFO cpu) and sets/s.
// See docs/benchmarks.md.
func BenchmarkSpreadSet(b *testing.B) {
	servers := []*redistest.Server{redistest.Start(b), redistest.Start(b)}
	shards := make([]redisstore.Shard, len(servers))
	for i, srv := range servers {
		shards[i] = redisstore.Shard{Name: srv.Addr(), Runner: redisstore.NewRunner(newClient(b, srv.URL()))}
	}
	r, err := redisstore.NewShardedRunner(shards...)
	if err != nil {
		b.Fatal(err)
	}
	s := redisstore.NewWithRunner(r, redisstore.WithTimeout(benchTimeout))
	p := &sluice.Policy{Name: "spread", Algorithm: sluice.GCRA, Limit: 1e9, Period: time.Second}
	// Keys of each shard, so that every set spans both.
	var keys [2][]string
	for i := 0; len(keys[0]) < 1000 || len(keys[1]) < 1000; i++ {
		k := "k" + strconv.Itoa(i)
		if sh := s.ShardOf(p, k); len(keys[sh]) < 1000 {
			keys[sh] = append(keys[sh], k)
		}
	}
	ctx := context.Background()
	set := func(i int) error {
		reqs := []sluice.Request{{Policy: p, Key: keys[0][i%1000], Cost: 1}, {Policy: p, Key: keys[1][(i*7)%1000], Cost: 1}}
		res := make([]sluice.Result, 2)
		if err := s.DecideAll(ctx, reqs, res); err != nil {
			return err
		}
		if !res[0].Allowed || !res[1].Allowed {
			b.Errorf("a set was denied: %+v", res)
		}
		return nil
	}
	perOp(b, servers, "set", 1, set)
}

// perOp runs op for b.N distinct i at benchConcurrency goroutines, after 100
// calls to load the functions and warm the connections, and reports the
// script calls Redis served (FCALL and EVALSHA, INFO commandstats, over all
// servers) and their CPU µs (INFO cpu) per unit, and units/s; each op is per
// units.
func perOp(b *testing.B, servers []*redistest.Server, unit string, per int, op func(i int) error) {
	for i := range 100 {
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	before, cpu := scriptCalls(b, servers), serversCPU(b, servers)
	var next atomic.Int64
	b.SetParallelism(max(1, (benchConcurrency+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(int(next.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	units := float64(b.N * per)
	b.ReportMetric(float64(scriptCalls(b, servers)-before)/units, "calls/"+unit)
	b.ReportMetric((serversCPU(b, servers)-cpu)*1e6/units, "redis-µs/"+unit)
	b.ReportMetric(units/b.Elapsed().Seconds(), unit+"s/s")
}

// serversCPU adds up the CPU seconds servers have used.
func serversCPU(b *testing.B, servers []*redistest.Server) float64 {
	var total float64
	for _, srv := range servers {
		total += redisCPU(b, srv)
	}
	return total
}

// scriptCalls adds up the FCALL and EVALSHA calls servers have served.
func scriptCalls(b *testing.B, servers []*redistest.Server) int64 {
	b.Helper()
	var total int64
	for _, srv := range servers {
		out, err := srv.Do("INFO", "commandstats")
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			line = strings.TrimSpace(line)
			for _, cmd := range []string{"cmdstat_fcall:calls=", "cmdstat_evalsha:calls="} {
				if rest, ok := strings.CutPrefix(line, cmd); ok {
					calls, _, _ := strings.Cut(rest, ",")
					n, err := strconv.ParseInt(calls, 10, 64)
					if err != nil {
						b.Fatalf("INFO commandstats: %q", line)
					}
					total += n
				}
			}
		}
	}
	return total
}
