package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkAcquireRelease: one acquisition and its release on the memory
// store, for one hot key and 10,000 keys, each key holding held other slots
// (which a release looks through), next to a gcra AllowN on the same keys in
// the same run. On one goroutine; the real clock.
//
//	go test -run '^$' -bench BenchmarkAcquireRelease -benchmem -count 6 ./memory/
func BenchmarkAcquireRelease(b *testing.B) {
	for _, ks := range keySets[:2] {
		for _, held := range []int{0, 10} {
			b.Run(ks.name+"/held="+strconv.Itoa(held), func(b *testing.B) {
				s := memory.New()
				l, err := sluice.New(s, sluice.Policy{Name: "bench", Algorithm: sluice.Concurrency, Limit: 100, Period: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				keys := benchKeys()[:ks.n]
				for _, k := range keys {
					for range held {
						l.Acquire(ctx, k)
					}
				}
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					k := keys[i%len(keys)]
					res, slot, err := l.Acquire(ctx, k)
					if err != nil || !res.Allowed {
						b.Fatalf("%+v, %v", res, err)
					}
					if ok, err := slot.Release(ctx); !ok || err != nil {
						b.Fatalf("release: %v, %v", ok, err)
					}
				}
			})
		}
		b.Run(ks.name+"/gcra-allow", func(b *testing.B) {
			s := memory.New()
			l, err := sluice.New(s, sluice.Policy{Name: "bench", Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			keys := benchKeys()[:ks.n]
			for _, k := range keys {
				l.Allow(ctx, k)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if res, err := l.Allow(ctx, keys[i%len(keys)]); err != nil || !res.Allowed {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
}
