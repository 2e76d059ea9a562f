package memory_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// Benchmarks: AllowN on the memory store for one hot key, 10,000 and 1,000,000
// keys, on one goroutine and under RunParallel, for every algorithm; and in the
// same run the usual hand-rolled peer, a map of x/time/rate limiters behind a
// mutex. Both read the real clock. Every key exists before timing starts.
//
//	go test -run '^$' -bench . -benchmem -count 5 ./memory/ | tee bench.txt
//	benchstat bench.txt

var keySets = []struct {
	name string
	n    int
}{{"hot", 1}, {"10k", 10_000}, {"1M", 1_000_000}}

// benchKeys is built on first use, so plain test runs don't pay for it.
var benchKeys = sync.OnceValue(func() []string {
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
})

// A key's state must outlive the gap between its visits (up to ~0.5s with 1M
// keys) or the store forgets it and the benchmark measures insertions; 1,000 per
// hour keeps every key's state, for both sides. The hot key spends its 1,000 and
// is denied from then on, on both sides alike.
const benchLimit, benchPeriod = 1_000, time.Hour

func BenchmarkAllowN(b *testing.B) {
	for _, a := range sluice.Algorithms {
		for _, ks := range keySets {
			b.Run(string(a)+"/"+ks.name, func(b *testing.B) {
				// Bounds with room for every key: the benchmark measures
				// decisions, not eviction (1M keys exceed the default
				// byte budget). The exact part, which holds them, has half
				// the byte budget.
				s := memory.New(memory.WithMaxKeys(2*ks.n), memory.WithMaxBytes(2*max(1<<20, int64(ks.n)<<10)))
				l, err := sluice.New(s, sluice.Policy{Name: "bench", Algorithm: a, Limit: benchLimit, Period: benchPeriod})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				keys := benchKeys()[:ks.n]
				for _, k := range keys {
					l.AllowN(ctx, k, 1)
				}
				serialAndParallel(b, keys, func(k string) error {
					_, err := l.AllowN(ctx, k, 1)
					return err
				})
			})
		}
	}
}

// serialAndParallel times allow on one goroutine, cycling through keys
// (serial) and picking them at random (random), and under RunParallel, picking
// keys at random (xorshift: no shared state). Cycling visits keys in the order
// they were stored, which a peer whose state was allocated in that order
// serves from the prefetcher; random order is what real traffic looks like. Besides
// ns/op it reports cpu-ns/op, the process's CPU time per decision (all cores
// summed): a machine busy with other work stretches ns/op but not that.
func serialAndParallel(b *testing.B, keys []string, allow func(key string) error) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		start := memory.CPUTime(b)
		for b.Loop() {
			if err := allow(keys[i]); err != nil {
				b.Fatal(err)
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		b.ReportMetric(float64(memory.CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
	})
	b.Run("random", func(b *testing.B) {
		b.ReportAllocs()
		x := uint64(0x9e3779b97f4a7c15)
		start := memory.CPUTime(b)
		for b.Loop() {
			x = xorshift(x)
			if err := allow(keys[x%uint64(len(keys))]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(memory.CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var seed atomic.Uint64
		start := memory.CPUTime(b)
		b.RunParallel(func(pb *testing.PB) {
			x := seed.Add(0x9e3779b97f4a7c15) | 1
			for pb.Next() {
				x = xorshift(x)
				if err := allow(keys[x%uint64(len(keys))]); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(memory.CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
	})
}

// xorshift is the next of a cheap pseudo-random sequence (x ≠ 0).
func xorshift(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// rateMap is the peer: what many services write by hand.
type rateMap struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (r *rateMap) allow(key string) bool {
	r.mu.Lock()
	l, ok := r.m[key]
	if !ok {
		l = rate.NewLimiter(rate.Limit(float64(benchLimit)/benchPeriod.Seconds()), benchLimit)
		r.m[key] = l
	}
	r.mu.Unlock()
	return l.Allow()
}

func BenchmarkPeerXTimeRateMap(b *testing.B) {
	for _, ks := range keySets {
		b.Run(ks.name, func(b *testing.B) {
			r := &rateMap{m: make(map[string]*rate.Limiter)}
			keys := benchKeys()[:ks.n]
			for _, k := range keys {
				r.allow(k)
			}
			serialAndParallel(b, keys, func(k string) error {
				r.allow(k)
				return nil
			})
		})
	}
}

// BenchmarkFloor measures what every decision on this store pays before the
// store's own work: the shared decision math (sluice.Decide, per algorithm, on
// a state in a local variable) and reading the monotonic clock.
func BenchmarkFloor(b *testing.B) {
	for _, a := range sluice.Algorithms {
		b.Run("decide/"+string(a), func(b *testing.B) {
			p := &sluice.Policy{Name: "bench", Algorithm: a, Limit: benchLimit, Period: benchPeriod}
			var st sluice.State
			now := time.Now().UnixMicro()
			start := memory.CPUTime(b)
			for b.Loop() {
				next, res := sluice.Decide(p, st, now, 1)
				if res.Allowed {
					st = next
				}
				now += 3600 // one emission interval: a steady, mostly admitted stream
			}
			b.ReportMetric(float64(memory.CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
	b.Run("clock", func(b *testing.B) {
		anchor := time.Now()
		var sum time.Duration
		start := memory.CPUTime(b)
		for b.Loop() {
			sum += time.Since(anchor)
		}
		b.ReportMetric(float64(memory.CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
		if sum < 0 {
			b.Fatal("clock ran backwards")
		}
	})
}
