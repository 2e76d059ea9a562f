package service

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkDecide measures Decide, the decision path the HTTP and Envoy front
// ends share, on the memory store: one check per decision from parallel
// callers over 10,000 keys, under a limit they never reach. Its variants
// (benchVariants) compare tracing off and on.
func BenchmarkDecide(b *testing.B) {
	p := &config.Policy{Policy: sluice.Policy{Name: "per_user", Algorithm: sluice.GCRA, Limit: 1 << 30, Period: time.Second}}
	cfg := &config.Config{Policies: map[string]*config.Policy{p.Name: p}}
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	for _, v := range benchVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			s := New(storestack.Of(memory.New(), storestack.WithTracer(v.tracer)), cfg, WithLogger(quiet))
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				checks := []engine.Check{{Policy: p, Cost: 1}}
				results := make([]sluice.Result, 1)
				for pb.Next() {
					checks[0].Key = keys[int(next.Add(1))%len(keys)]
					if ok, err := s.Decide(ctx, checks, results); err != nil || !ok {
						b.Fatal(ok, err)
					}
				}
			})
		})
	}
}
