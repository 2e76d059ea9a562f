package redisstore_test

import (
	"context"
	"strconv"
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
// the script calls and the redis-server CPU µs per operation (perOp). See
// docs/benchmarks.md.
func BenchmarkReserve(b *testing.B) {
	for _, op := range []string{"decide", "reserve"} {
		b.Run(op, func(b *testing.B) {
			srv := redistest.Start(b)
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
			perOp(b, []*redistest.Server{srv}, "op", 1, func(i int) error {
				return do(i * 7919) // a stride prime to 10,000: every key in turn
			})
		})
	}
}
