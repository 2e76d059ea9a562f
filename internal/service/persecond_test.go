package service

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestPerSecondStore: with store.per_second_url, a decision spanning a
// per-second limit and an hourly one counts the first on that Redis and the
// second on store.url's; readiness probes both, so an idle node whose main
// Redis is gone is not ready though the per-second one answers.
func TestPerSecondStore(t *testing.T) {
	main, perSecond := redistest.Start(t), redistest.Start(t)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, "policies:\n  - {name: ps, algorithm: fixed_window, limit: 5, period: 30s}\n  - {name: ph, algorithm: gcra, limit: 5, period: 1h}\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := storestack.Open(config.Store{URL: main.URL(), PerSecondURL: perSecond.URL(), Breaker: config.Breaker{Cooldown: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := New(store, cfg, WithLogger(quiet))
	ctx := context.Background()
	ps, ph := cfg.Policies["ps"], cfg.Policies["ph"]
	results := make([]sluice.Result, 2)
	if ok, err := s.Decide(ctx, []engine.Check{{Policy: ps, Key: "a", Cost: 1}, {Policy: ph, Key: "a", Cost: 1}}, results); err != nil || !ok {
		t.Fatalf("decided %v, %v", ok, err)
	}
	rs := store.Redis
	for _, c := range []struct {
		p      *config.Policy
		on     *redistest.Server
		absent *redistest.Server
	}{{ph, main, perSecond}, {ps, perSecond, main}} {
		key := rs.Key(&c.p.Policy, "a")
		if n, err := c.on.Do("EXISTS", key); err != nil || strings.TrimSpace(n) != "1" {
			t.Errorf("%s: %q not on its server: %q %v", c.p.Name, key, n, err)
		}
		if n, err := c.absent.Do("EXISTS", key); err != nil || strings.TrimSpace(n) != "0" {
			t.Errorf("%s: %q on the other server: %q %v", c.p.Name, key, n, err)
		}
	}
	if st := s.Ready(ctx); !st.Ready {
		t.Fatalf("not ready with both servers up: %+v", st)
	}
	main.Kill()
	testwait.Until(t, "not ready with the main Redis gone", func() bool { return !s.Ready(ctx).Ready })
}
