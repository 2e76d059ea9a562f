package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// Posting and reading a demand board of 1,000 and 100,000 members on one
// Redis: what each node pays once per share interval. Besides the time of
// the whole post or read, each reports the longest single command Redis ran
// for it (max-cmd-ms, from SLOWLOG): how long it kept every other client
// waiting.
func BenchmarkBoard(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, redistest.Start(b).URL())
	s := redisstore.New(c, redisstore.WithTimeout(time.Minute))
	for _, n := range []int{1_000, 100_000} {
		board := fmt.Sprint("bench-", n)
		ds := make([]sluice.Demand, n)
		for i := range ds {
			ds[i] = sluice.Demand{Member: fmt.Sprint("node tenant-", i), Value: float64(i)}
		}
		if err := s.PostDemand(ctx, board, ds, time.Hour); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint("post/", n), func(b *testing.B) {
			resetSlowlog(b, c)
			for b.Loop() {
				if err := s.PostDemand(ctx, board, ds, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			most, median, p99 := slowest(b, c)
			b.ReportMetric(most, "max-cmd-ms")
			b.ReportMetric(median, "p50-cmd-ms")
			b.ReportMetric(p99, "p99-cmd-ms")
		})
		b.Run(fmt.Sprint("read/", n), func(b *testing.B) {
			resetSlowlog(b, c)
			for b.Loop() {
				got, err := s.ReadDemand(ctx, board)
				if err != nil || len(got) != n {
					b.Fatalf("read %d members, %v", len(got), err)
				}
			}
			most, median, p99 := slowest(b, c)
			b.ReportMetric(most, "max-cmd-ms")
			b.ReportMetric(median, "p50-cmd-ms")
			b.ReportMetric(p99, "p99-cmd-ms")
		})
	}
}

// resetSlowlog makes Redis log every command from now on.
func resetSlowlog(b *testing.B, c rueidis.Client) {
	ctx := context.Background()
	for _, cmd := range []rueidis.Completed{
		c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "0").ParameterValue("slowlog-max-len", "1000000").Build(),
		c.B().SlowlogReset().Build(),
	} {
		if err := c.Do(ctx, cmd).Error(); err != nil {
			b.Fatal(err)
		}
	}
}

// slowest returns the longest, the median and the 99th percentile time of
// the store's calls (its scripts, each with the commands it ran) in the slow
// log, in ms.
func slowest(b *testing.B, c rueidis.Client) (most, median, p99 float64) {
	entries, err := c.Do(context.Background(), c.B().SlowlogGet().Count(-1).Build()).ToArray()
	if err != nil {
		b.Fatal(err)
	}
	var times []int64
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			b.Fatalf("a slow log entry: %v", err)
		}
		us, err := f[2].AsInt64()
		if err != nil {
			b.Fatal(err)
		}
		args, err := f[3].AsStrSlice()
		if err != nil || len(args) == 0 {
			b.Fatalf("a slow log entry's command: %v", err)
		}
		switch strings.ToUpper(args[0]) {
		case "FCALL", "EVALSHA", "EVAL": // a call of the store's, not one a script made
			times = append(times, us)
		}
	}
	if len(times) == 0 {
		return 0, 0, 0
	}
	slices.Sort(times)
	ms := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))]) / 1000 }
	return ms(1), ms(0.5), ms(0.99)
}
