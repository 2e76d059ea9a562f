package xdsconfig_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/xdsconfig"
	"github.com/sluicehq/sluice/internal/xdstest"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkVersionApplied measures one version's trip: set on a real
// go-control-plane server, sent over ADS on loopback, converted, validated,
// put in force in a Service and ACKed, for a domain of n descriptors.
func BenchmarkVersionApplied(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			cp := xdstest.Start(b, "127.0.0.1:0")
			files, _ := config.ParseDocuments()
			svc := service.New(storestack.Of(memory.New()), files, service.WithLogger(quiet))
			applied := make(chan struct{}, 1)
			c, err := xdsconfig.New(xdsconfig.Options{Server: cp.Addr, NodeID: xdstest.NodeID, Logger: quiet,
				Apply: func(cfg *config.Config) error {
					err := svc.ApplyDynamic(cfg)
					applied <- struct{}{}
					return err
				}})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { c.Run(ctx) })
			defer func() { cancel(); wg.Wait() }()
			version := func(i int) *rlsconf.RateLimitConfig {
				rc := &rlsconf.RateLimitConfig{Name: "edge", Domain: "edge"}
				for d := range n {
					rc.Descriptors = append(rc.Descriptors, &rlsconf.RateLimitDescriptor{Key: "user", Value: fmt.Sprint("u", d),
						RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: uint32(i + 1)}})
				}
				return rc
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				rc := version(i)
				b.StartTimer()
				cp.Set(fmt.Sprint("v", i), rc)
				<-applied
			}
			b.StopTimer()
			if got := svc.Config().Policy("edge.user_u0").Limit; got != int64(b.N) {
				b.Fatalf("limit in force %d, want %d", got, b.N)
			}
		})
	}
}

// BenchmarkVersionCost measures what one version of n descriptors (one
// domain, one level) costs a node: decoded from its resource, validated and
// put in force over the previous one, as the xDS client does with each
// version. Besides the time, the CPU time (cpu-ms/op, the collector's
// included) and the bytes allocated, peak-MB is the most the
// heap held above the node's own while versions applied (old and new
// configurations, and what building the new one left for the collector),
// and kept-MB what the configuration in force holds.
func BenchmarkVersionCost(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 300_000} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			res := anyOf(b, flat("edge", n))
			lim := xdsconfig.Limits{Descriptors: n, Bytes: 1 << 40}
			files, _ := config.ParseDocuments()
			svc := service.New(storestack.Of(memory.New()), files, service.WithLogger(quiet))
			base := heapBytes(true)
			var peak atomic.Uint64
			stop := sampleHeap(&peak)
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				cfg, err := xdsconfig.Convert(res, lim)
				if err != nil {
					b.Fatal(err)
				}
				if err := svc.ApplyDynamic(cfg); err != nil {
					b.Fatal(err)
				}
			}
			stop()
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(peak.Load()-min(base, peak.Load()))/(1<<20), "peak-MB")
			b.ReportMetric(float64(heapBytes(true)-base)/(1<<20), "kept-MB")
			if len(svc.Config().Policies) != n {
				b.Fatalf("%d policies in force, want %d", len(svc.Config().Policies), n)
			}
		})
	}
}

// cpuTime is the CPU time the process has used, its own and the
// collector's: on a loaded machine a steadier measure than the time taken.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapBytes is the bytes of heap objects, live ones only after a collection
// when collect is set.
func heapBytes(collect bool) uint64 {
	if collect {
		runtime.GC()
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeap records in peak the most heapBytes reads, every millisecond,
// until the returned function is called.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if h := heapBytes(false); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// flat is a domain of n descriptors on one level, user=uI, I+1 a minute.
func flat(domain string, n int) *rlsconf.RateLimitConfig {
	rc := &rlsconf.RateLimitConfig{Name: domain, Domain: domain, Descriptors: make([]*rlsconf.RateLimitDescriptor, n)}
	for i := range rc.Descriptors {
		rc.Descriptors[i] = &rlsconf.RateLimitDescriptor{Key: "user", Value: fmt.Sprint("u", i),
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: uint32(i + 1)}}
	}
	return rc
}
