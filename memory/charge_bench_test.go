package memory_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkCharge: Charge on the memory store, 10,000 keys that exist
// before timing starts, for every algorithm, as BenchmarkAllowN times
// decisions: a charge costs what a decision does, with no allocation.
//
//	go test -run '^$' -bench 'Charge' -benchmem -count 5 ./memory/
func BenchmarkCharge(b *testing.B) {
	for _, a := range sluice.Algorithms {
		b.Run(string(a)+"/10k", func(b *testing.B) {
			s := memory.New(memory.WithMaxKeys(20_000))
			l, err := sluice.New(s, sluice.Policy{Name: "bench", Algorithm: a, Limit: benchLimit, Period: benchPeriod})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			keys := benchKeys()[:10_000]
			for _, k := range keys {
				l.Charge(ctx, k, 1)
			}
			serialAndParallel(b, keys, func(k string) error {
				_, err := l.Charge(ctx, k, 1)
				return err
			})
		})
	}
}
