package service

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkDecideOverrides: what overrides add to a decision on the memory
// store — none in force, 1000 prefixes on another policy, and 1000 prefixes
// on the decided policy with the key matching one.
func BenchmarkDecideOverrides(b *testing.B) {
	p := &config.Policy{Policy: sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Second}}
	other := sluice.Policy{Name: "other", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	cfg := &config.Config{Policies: map[string]*config.Policy{"p": p}}
	for _, c := range []struct {
		name string
		on   *sluice.Policy
	}{{"none", nil}, {"other_policy", &other}, {"matching", &p.Policy}} {
		b.Run(c.name, func(b *testing.B) {
			ov := overrides.NewMemory(overrides.WithLogger(slog.New(slog.DiscardHandler)))
			if c.on != nil {
				for i := range 1000 {
					if _, err := ov.Put(context.Background(), *c.on, overrides.Override{Prefix: "t" + strconv.Itoa(i) + ":", Limit: 1 << 40, Period: time.Second}); err != nil {
						b.Fatal(err)
					}
				}
			}
			s := New(storestack.Of(memory.New()), cfg, WithOverrides(ov), WithLogger(slog.New(slog.DiscardHandler)))
			checks := []engine.Check{{Policy: p, Key: "t500:user", Cost: 1}}
			res := make([]sluice.Result, 1)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Decide(context.Background(), checks, res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
