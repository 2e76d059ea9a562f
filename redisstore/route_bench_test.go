package redisstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkRoutedSet: the latency of an all-or-nothing set of a per-second
// and an hourly limit (an Envoy request with a descriptor of each), one at
// a time over 10,000 keys: on one Redis (one script), and routed over two,
// the per-second limit on a Redis of its own (a dry run on both, then two
// reservations in turn). Both generous enough that every set is admitted;
// the timeout is generous too, as the benchmark measures and must not fail
// on a loaded machine.
// docs/benchmarks.md, "A Redis for per-second limits", has the command and
// the results.
func BenchmarkRoutedSet(b *testing.B) {
	perSecond := &sluice.Policy{Name: "ps", Algorithm: sluice.FixedWindow, Limit: 1 << 30, Period: time.Second}
	perHour := &sluice.Policy{Name: "ph", Algorithm: sluice.GCRA, Limit: 1 << 30, Period: time.Hour}
	for _, side := range []struct {
		name string
		open func(b *testing.B) *redisstore.Store
	}{
		{"one-server", func(b *testing.B) *redisstore.Store {
			s, err := redisstore.Open(redistest.Start(b).URL(), redisstore.WithTimeout(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"routed", func(b *testing.B) *redisstore.Store {
			urls := []string{redistest.Start(b).URL(), redistest.Start(b).URL()}
			s, err := redisstore.OpenRouted(urls, func(p *sluice.Policy) int {
				if p.Period < time.Minute {
					return 1
				}
				return 0
			}, redisstore.WithTimeout(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	} {
		b.Run(side.name, func(b *testing.B) {
			s := side.open(b)
			defer s.Close()
			ctx := context.Background()
			res := make([]sluice.Result, 2)
			set := func(i int) {
				key := benchKeyNames[i%benchKeys]
				if err := s.DecideAll(ctx, []sluice.Request{{Policy: perSecond, Key: key, Cost: 1}, {Policy: perHour, Key: key, Cost: 1}}, res); err != nil {
					b.Fatal(err)
				}
				if !res[0].Allowed {
					b.Fatal("denied")
				}
			}
			for i := range 1000 {
				set(i)
			}
			durs := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				set(i)
				durs = append(durs, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(durs)
			q := func(p float64) float64 {
				return float64(durs[int(p*float64(len(durs)-1))]) / float64(time.Microsecond)
			}
			b.ReportMetric(q(0.50), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
		})
	}
}
