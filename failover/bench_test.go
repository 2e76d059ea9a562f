package failover_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkDecide is the cost the fail-over Store adds to a healthy primary
// (the memory store): timeout, breaker, latency estimate, per call; and with
// a breaker per node, the lookup of the request's node's breaker (nodeOf
// itself costs nothing here: see redisstore's BenchmarkNodeOf).
func BenchmarkDecide(b *testing.B) {
	for _, name := range []string{"memory", "failover", "failover_per_node"} {
		b.Run(name, func(b *testing.B) {
			var s sluice.Store = memory.New()
			switch name {
			case "failover":
				s = failover.New(s)
			case "failover_per_node":
				s = failover.New(s, failover.WithBreakerPerNode(func(sluice.Request) string { return "10.0.0.2:6379" }))
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
