package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// TestOverridesChangeTheLimitNotTheState: an override decides under its own
// limit on the policy's state, Result.Limit says so, and removing it brings
// the policy's limit back on the same count.
func TestOverridesChangeTheLimitNotTheState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, policyFile(3))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	ov := overrides.NewMemory(overrides.WithClock(clock), overrides.WithLogger(slog.New(slog.DiscardHandler)))
	s := New(storestack.Of(memory.New(memory.WithClock(clock))), cfg, WithOverrides(ov))
	ctx := context.Background()
	p := cfg.Policy("p")

	if _, err := ov.Put(ctx, p.Policy, overrides.Override{Prefix: "acme:", Limit: 5, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := ov.Put(ctx, p.Policy, overrides.Override{Key: "acme:vip", Limit: 10, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	count := func(key string) (n int64, limit int64) {
		for {
			r := decide1(t, s, "p", key, 1)
			if !r.Allowed {
				return n, r.Limit
			}
			n++
		}
	}
	for key, want := range map[string]int64{"acme:1": 5, "acme:vip": 10, "other": 3} {
		if n, limit := count(key); n != want || limit != want {
			t.Errorf("%s: admitted %d under limit %d, want %d", key, n, limit, want)
		}
	}
	// A cost above the policy's capacity but within the override's is valid.
	res := make([]sluice.Result, 1)
	if _, err := s.Decide(ctx, []engine.Check{{Policy: p, Key: "acme:new", Cost: 5}}, res); err != nil || !res[0].Allowed {
		t.Errorf("cost 5 under a limit of 5: %v %+v", err, res[0])
	}
	if _, err := s.Decide(ctx, []engine.Check{{Policy: p, Key: "acme:new", Cost: 6}}, res); !errors.Is(err, sluice.ErrExceedsCapacity) {
		t.Errorf("cost 6 under a limit of 5: got %v", err)
	}
	// Removed: the key's count (10) stays, under the policy's limit (3).
	if err := ov.Delete(ctx, "p", "k:acme:vip"); err != nil {
		t.Fatal(err)
	}
	if r := decide1(t, s, "p", "acme:vip", 1); r.Allowed || r.Limit != 5 || r.Remaining > 0 {
		t.Errorf("after removing the key's override: %+v, want a denial under the prefix's limit 5", r)
	}
	// Metrics count by the configured policy; the gauge follows the overrides.
	if got := metric(t, s, "sluice_decisions_total", "policy", "p", "decision", observe.DecisionAllowed); got != 19 {
		t.Errorf("allowed decisions counted under the policy: %v, want 19 (18 ones and one of cost 5)", got)
	}
	if got := gathered(t, s, "sluice_overrides"); got != 1 {
		t.Errorf("sluice_overrides = %v, want 1", got)
	}
	if got := gathered(t, s, "sluice_overrides_changes_total"); got != 3 {
		t.Errorf("sluice_overrides_changes_total = %v, want 3 (2 sets, 1 delete)", got)
	}
}

// gathered sums the samples of the metric named name in s's registry.
func gathered(t *testing.T, s *Service, name string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestPlans: a check is decided under its plan's limit (the default's for
// none or an unknown one) on the policy's state, and a key's override beats
// its plan.
func TestPlans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, "policies:\n  - name: p\n    algorithm: fixed_window\n    limit: 3\n    period: 1m\n"+
		"    plans:\n      default: free\n      limits:\n        free: {limit: 2}\n        pro: {limit: 6}\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	ov := overrides.NewMemory(overrides.WithClock(clock), overrides.WithLogger(slog.New(slog.DiscardHandler)))
	s := New(storestack.Of(memory.New(memory.WithClock(clock))), cfg, WithOverrides(ov))
	p := cfg.Policy("p")
	if _, err := ov.Put(context.Background(), p.Policy, overrides.Override{Key: "vip", Limit: 9, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	admitted := func(key, plan string) (n int64, limit int64) {
		res := make([]sluice.Result, 1)
		for {
			if _, err := s.Decide(context.Background(), []engine.Check{{Policy: p, Key: key, Cost: 1, Plan: plan}}, res); err != nil {
				t.Fatal(err)
			}
			if !res[0].Allowed {
				return n, res[0].Limit
			}
			n++
		}
	}
	for _, c := range []struct {
		key, plan string
		want      int64
	}{{"a", "pro", 6}, {"b", "free", 2}, {"c", "", 2}, {"d", "gold", 2}, {"vip", "free", 9}} {
		if n, limit := admitted(c.key, c.plan); n != c.want || limit != c.want {
			t.Errorf("key %s plan %q: admitted %d under %d, want %d", c.key, c.plan, n, limit, c.want)
		}
	}
	// Moving a key to another plan keeps its count: the 6 units a spent on pro
	// are more than free allows.
	if n, _ := admitted("a", "free"); n != 0 {
		t.Errorf("after upgrading back to free: %d admitted, want 0", n)
	}

	// Resolve names the limit each check is decided under, and Decide keeps
	// to it even when the override it came from is gone by then; metrics
	// still count by the configured policy.
	checks := []engine.Check{{Policy: p, Key: "vip", Plan: "pro", Cost: 1}, {Policy: p, Key: "e", Plan: "pro", Cost: 1}, {Policy: p, Key: "f", Cost: 1}}
	s.Resolve(checks)
	for i, want := range []int64{9, 6, 2} {
		if l := checks[i].Applied(); l.Limit != want || l.Name != "p" || checks[i].Policy != p {
			t.Errorf("check %d resolved to %+v, want a limit of %d", i, l, want)
		}
	}
	if err := ov.Delete(context.Background(), "p", "k:vip"); err != nil {
		t.Fatal(err)
	}
	res := make([]sluice.Result, 3)
	if _, err := s.Decide(context.Background(), checks, res); err != nil || res[0].Limit != 9 || res[1].Limit != 6 {
		t.Errorf("decided %+v, %v; want under the resolved limits 9 and 6", res, err)
	}
}
