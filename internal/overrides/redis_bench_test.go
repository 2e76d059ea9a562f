package overrides_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/redistest"
)

// BenchmarkRedisChange: what a change costs with 0, 2,400 and 9,998 other
// overrides held (10,000 with the benchmark's own two), on one real Redis:
// replace sets one override again, add_remove sets a new one and removes it.
// Each op includes reading the change back, as the node that made it does
// (and every other node, told by pub/sub). redis-us/op is the Redis time of
// the scripts (INFO commandstats), per op. Only the public API is used, so
// the benchmark runs unchanged against earlier versions.
func BenchmarkRedisChange(b *testing.B) {
	srv := redistest.Start(b)
	opt, err := rueidis.ParseURL(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	s := overrides.NewRedis(opt, overrides.WithLogger(slog.New(slog.DiscardHandler)))
	b.Cleanup(s.Close)
	ctx := context.Background()
	bench := sluice.Policy{Name: "bench", Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute}
	held := 0
	for _, n := range []int{0, 2400, 9998} {
		fillTo(b, s, &held, n)
		b.Run(fmt.Sprintf("replace/held=%d", n), func(b *testing.B) {
			measure(b, srv, func(i int) error {
				_, err := s.Put(ctx, bench, overrides.Override{Key: "k", Limit: int64(1 + i%1000), Period: time.Minute})
				return err
			})
		})
		b.Run(fmt.Sprintf("add_remove/held=%d", n), func(b *testing.B) {
			measure(b, srv, func(i int) error {
				if _, err := s.Put(ctx, bench, overrides.Override{Key: "k2", Limit: 5, Period: time.Minute}); err != nil {
					return err
				}
				return s.Delete(ctx, "bench", "k:k2")
			})
		})
	}
}

// measure runs op in b's loop and reports the scripts' Redis time per op.
func measure(b *testing.B, srv *redistest.Server, op func(i int) error) {
	before, ops := scriptMicros(b, srv), 0
	for b.Loop() {
		if err := op(ops); err != nil {
			b.Fatal(err)
		}
		ops++
	}
	b.ReportMetric(float64(scriptMicros(b, srv)-before)/float64(ops), "redis-us/op")
}

// fillTo sets overrides on policies of 1,000 each until *held is n.
func fillTo(b *testing.B, s *overrides.Store, held *int, n int) {
	errs := make(chan error, 4)
	from := *held
	for w := range 4 {
		go func() {
			var err error
			for i := from + w; i < n && err == nil; i += 4 {
				p := sluice.Policy{Name: "fill" + strconv.Itoa(i/1000), Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute}
				_, err = s.Put(context.Background(), p, overrides.Override{Key: strconv.Itoa(i), Limit: 5, Period: time.Minute})
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	*held = n
}

// scriptMicros is the Redis time spent in scripts so far.
func scriptMicros(b *testing.B, srv *redistest.Server) int64 {
	out, err := srv.Do("INFO", "commandstats")
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(out, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}
