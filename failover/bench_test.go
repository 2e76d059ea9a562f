package failover_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkDecide is the cost the fail-over Store adds to a healthy primary
// (the memory store): timeout, breaker, latency estimate, per call.
func BenchmarkDecide(b *testing.B) {
	for _, name := range []string{"memory", "failover"} {
		b.Run(name, func(b *testing.B) {
			var s sluice.Store = memory.New()
			if name == "failover" {
				s = failover.New(s)
			}
			b.RunParallel(func(pb *testing.PB) {
				req := sluice.Request{Policy: policy, Key: "k"}
				for pb.Next() {
					if _, err := s.Decide(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
