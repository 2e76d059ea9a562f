package xdsconfig_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/xdstest"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/service"
	"github.com/sluicehq/sluice/xdsconfig"
)

// BenchmarkVersionApplied measures one version's trip: set on a real
// go-control-plane server, sent over ADS on loopback, converted, validated,
// put in force in a Service and ACKed, for a domain of n descriptors.
func BenchmarkVersionApplied(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			cp := xdstest.Start(b, "127.0.0.1:0")
			files, _ := config.ParseDocuments()
			svc := service.New(memory.New(), files, service.WithLogger(quiet))
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
