package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lease"
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
		b.Cleanup(rs.Close)
		return rs
	}
	b.Run("redis", func(b *testing.B) { run(b, open(b)) })
	b.Run("lease", func(b *testing.B) {
		ls := lease.New(open(b))
		run(b, ls)
		st := ls.Stats()
		b.ReportMetric(float64(st.StoreCalls)/float64(st.Decisions), "calls/decision")
		ls.Close(context.Background())
	})
}
