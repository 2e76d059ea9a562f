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
)

// BenchmarkReserve: what a lease's reservation costs Redis against a
// decision's, on 10,000 keys far from their limit (gcra, 1e9/s), 64
// goroutines, so that the calls are coalesced as a lease node's are:
// decide (Decide, cost 1) and reserve (Reserve of 1 to 3 units). It reports
// the script calls per operation and the redis-server CPU µs per operation
// (INFO cpu). See docs/benchmarks.md.
func BenchmarkReserve(b *testing.B) {
	for _, op := range []string{"decide", "reserve"} {
		b.Run(op, func(b *testing.B) {
			srv := redistest.Start(b)
			servers := []*redistest.Server{srv}
			s := redisstore.New(newClient(b, srv.URL()), redisstore.WithTimeout(benchTimeout))
			p := &sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1e9, Period: time.Second}
			ctx := context.Background()
			do := func(i int) error {
				req := sluice.Request{Policy: p, Key: "k" + strconv.Itoa(i%10000), Cost: 1}
				if op == "decide" {
					_, err := s.Decide(ctx, req)
					return err
				}
				r, err := s.Reserve(ctx, req, 3)
				if err == nil && r.Granted != 3 {
					b.Errorf("granted %d of 3 far from the limit", r.Granted)
				}
				return err
			}
			for i := range 100 { // load the functions, warm the connections
				if err := do(i); err != nil {
					b.Fatal(err)
				}
			}
			calls, cpu := scriptCalls(b, servers), serversCPU(b, servers)
			var next atomic.Int64
			b.SetParallelism(max(1, (benchConcurrency+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := do(int(next.Add(7919))); err != nil { // a stride prime to 10,000: every key in turn
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(scriptCalls(b, servers)-calls)/float64(b.N), "calls/op")
			b.ReportMetric((serversCPU(b, servers)-cpu)*1e6/float64(b.N), "redis-µs/op")
		})
	}
}
