package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// BenchmarkCompact measures the compact part: "held", AllowN on 10,000 keys
// that all live there (a sliding log peeks, since a second entry would move it
// to the exact part), in the modes of BenchmarkAllowN; and "spill", a new key
// per decision on a store whose exact part is full of keys it may not forget
// (another policy's), so that most go to the compact part (on a fake clock
// moving 1µs a decision, with a 5ms period: at most 10,000 of them live at
// once, in 16,384 slots, so none is folded).
//
//	go test -run '^$' -bench Compact -benchmem ./memory/
func BenchmarkCompact(b *testing.B) {
	for _, a := range sluice.Algorithms {
		b.Run(string(a)+"/held", func(b *testing.B) {
			s := memory.NewCompactFirst()
			l, err := sluice.New(s, sluice.Policy{Name: "bench", Algorithm: a, Limit: benchLimit, Period: benchPeriod})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			keys := benchKeys()[:10_000]
			for _, k := range keys {
				l.AllowN(ctx, k, 1)
			}
			cost := int64(1)
			if a == sluice.SlidingLog {
				cost = 0
			}
			serialAndParallel(b, keys, func(k string) error {
				_, err := l.AllowN(ctx, k, cost)
				return err
			})
		})
		b.Run(string(a)+"/spill", func(b *testing.B) {
			clock := storetest.NewClock(storetest.Epoch)
			s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(1024))
			hold, _ := sluice.New(s, sluice.Policy{Name: "hold", Algorithm: a, Limit: 5, Period: time.Hour})
			l, err := sluice.New(s, sluice.Policy{Name: "bench", Algorithm: a, Limit: 5, Period: 5 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for i := range 2048 {
				hold.Allow(ctx, "hold-"+strconv.Itoa(i))
			}
			keys := benchKeys()
			b.ReportAllocs()
			i := 0
			start := memory.CPUTime(b)
			for b.Loop() {
				clock.Advance(time.Microsecond)
				if _, err := l.Allow(ctx, keys[i]); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
			b.ReportMetric(float64(memory.CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
			if st := s.Stats(); st.Folded != 0 || st.Spilled < uint64(b.N)/2 {
				b.Fatalf("stats %+v after %d decisions: want most spilled, none folded", st, b.N)
			}
		})
	}
}
