package redisstore_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// The Redis store against go-redis/redis_rate v10, the usual GCRA limiter on
// go-redis, each on its own fresh redis-server started per benchmark, in the
// same run. See docs/benchmarks.md, "Redis store", for the command and
// results. Both sides get a generous limit (1,000,000/s, burst 1,000,000) so
// nearly every decision admits and writes, and both read the Redis clock.

const (
	benchKeys        = 10_000
	benchConcurrency = 64 // goroutines for BenchmarkDecide
)

// benchRate is the rate of both sides.
const benchRate = 1_000_000

var benchPolicy = sluice.Policy{Name: "bench", Algorithm: sluice.GCRA, Limit: benchRate, Period: time.Second}

// benchKeyNames are built once so the loops measure the limiters, not strconv.
var benchKeyNames = func() []string {
	k := make([]string, benchKeys)
	for i := range k {
		k[i] = "user:" + strconv.Itoa(i)
	}
	return k
}()

// decideFunc is one decision for key; it reports whether it was admitted.
type decideFunc func(ctx context.Context, key string) (bool, error)

// benchSides starts a fresh redis-server for each side and returns its
// decision function, in a fixed order (sluice first).
var benchSides = []struct {
	name  string
	start func(b *testing.B) decideFunc
}{
	{"sluice", startSluice},
	{"redis_rate", startRedisRate},
}

func startSluice(b *testing.B) decideFunc {
	srv := redistest.Start(b)
	st, err := redisstore.Open(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	l, err := sluice.New(st, benchPolicy)
	if err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, key string) (bool, error) {
		r, err := l.AllowN(ctx, key, 1)
		return r.Allowed, err
	}
}

func startRedisRate(b *testing.B) decideFunc {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis defaults: pool of 10 per GOMAXPROCS
	b.Cleanup(func() { _ = rdb.Close() })
	lim := redis_rate.NewLimiter(rdb)
	limit := redis_rate.PerSecond(benchRate)
	return func(ctx context.Context, key string) (bool, error) {
		r, err := lim.Allow(ctx, key, limit)
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}
}

// warm makes one decision per key in the set (loading the script, filling the
// connection pools) before the timer starts.
func warm(b *testing.B, decide decideFunc, keys []string) {
	ctx := context.Background()
	for _, k := range keys[:min(len(keys), 100)] {
		if _, err := decide(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecide: decisions/s with 64 goroutines (RunParallel with
// SetParallelism so that GOMAXPROCS×p ≈ 64), over 10,000 keys and on one hot
// key.
func BenchmarkDecide(b *testing.B) {
	for _, side := range benchSides {
		b.Run(side.name, func(b *testing.B) {
			for _, ks := range []struct {
				name string
				keys []string
			}{{"10k", benchKeyNames}, {"hot", benchKeyNames[:1]}} {
				b.Run(ks.name, func(b *testing.B) {
					decide := side.start(b)
					warm(b, decide, ks.keys)
					var seed, denied atomic.Int64
					ctx := context.Background()
					b.SetParallelism(max(1, (benchConcurrency+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
					b.ReportAllocs()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						// Each goroutine walks the keys from its own offset.
						i := int(seed.Add(7919)) % len(ks.keys)
						for pb.Next() {
							ok, err := decide(ctx, ks.keys[i])
							if err != nil {
								b.Error(err)
								return
							}
							if !ok {
								denied.Add(1)
							}
							if i++; i == len(ks.keys) {
								i = 0
							}
						}
					})
					b.StopTimer()
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
					b.ReportMetric(float64(denied.Load())/float64(b.N), "denied/op")
				})
			}
		})
	}
}

// BenchmarkLatency: one goroutine, one decision at a time over 10,000 keys;
// reports the median and 99th percentile of the calls in µs.
func BenchmarkLatency(b *testing.B) {
	for _, side := range benchSides {
		b.Run(side.name, func(b *testing.B) {
			decide := side.start(b)
			warm(b, decide, benchKeyNames)
			b.ReportAllocs()
			latencyLoop(b, decide)
		})
	}
}

// captureRunner records what the Store hands its Runner, without Redis.
type captureRunner struct {
	script *redisstore.Script
	keys   []string
	args   []string
}

func (c *captureRunner) Run(_ context.Context, s *redisstore.Script, keys, args []string, reply []int64) error {
	c.script, c.keys, c.args = s, slices.Clone(keys), slices.Clone(args)
	return nil
}

func (c *captureRunner) RunMulti(context.Context, []redisstore.Call) {}

func (c *captureRunner) Colocated([]string) bool { return true }

func (c *captureRunner) Mode(context.Context) (redisstore.Mode, error) {
	return redisstore.ModeScripts, nil
}

// TestPrintGCRAScript writes, for scripts/redis-ceiling.sh, the exact GCRA
// script a decision of benchPolicy runs, its SHA-1, key and ARGV (one a
// line), the function library and the GCRA function's name into the
// directory SLUICE_SCRIPT_DIR; without it the test skips.
func TestPrintGCRAScript(t *testing.T) {
	dir := os.Getenv("SLUICE_SCRIPT_DIR")
	if dir == "" {
		t.Skip("set SLUICE_SCRIPT_DIR to write the GCRA script for scripts/redis-ceiling.sh")
	}
	var c captureRunner
	l, err := sluice.New(redisstore.NewWithRunner(&c), benchPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AllowN(context.Background(), "k", 1); err != nil {
		t.Fatal(err)
	}
	_, lib := redisstore.Library()
	files := map[string]string{
		"library.lua": lib,
		"function":    c.script.Function() + "\n",
		"script.lua":  c.script.Source(),
		"sha1":        c.script.SHA1() + "\n",
		"key":         strings.Join(c.keys, "\n") + "\n",
		"args":        strings.Join(c.args, "\n") + "\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("script %s (%s), key %q, ARGV %q", c.script.Name(), c.script.SHA1(), c.keys, c.args)
}
