package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestReadyRedisRefusingWrites: a Redis at maxmemory under noeviction still
// answers reads (PING), but refuses every write, so no decision is made by
// it. /readyz must say so — on an idle node (its probe writes) and under
// traffic (the breaker opens) — while each decision stays bounded by the
// local limit; once Redis takes writes again the node is ready again.
func TestReadyRedisRefusingWrites(t *testing.T) {
	r := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, policyFile(5))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := storestack.Open(config.Store{URL: r.URL(), Breaker: config.Breaker{MinCalls: 4, Cooldown: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	logs := &syncLog{}
	s := New(store, cfg, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	ctx := context.Background()
	eventually := func(what string, ready bool) StoreStatus {
		t.Helper()
		var st StoreStatus
		testwait.UntilSaw(t, what, func() (bool, string) {
			st = s.Ready(ctx)
			return st.Ready == ready, fmt.Sprintf("%+v", st)
		})
		return st
	}
	eventually("ready", true)

	for _, args := range [][]string{{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"CONFIG", "SET", "maxmemory", "1"}} {
		if _, err := r.Do(args...); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := r.Do("PING"); err != nil || out != "PONG" {
		t.Fatalf("PING at maxmemory: %q, %v (a read-only probe would pass)", out, err)
	}
	// Idle: the probe is a write, and Redis refuses it.
	st := s.Ready(ctx)
	if st.Ready || !strings.Contains(st.Error, "OOM") {
		t.Fatalf("an idle node with Redis refusing writes: %+v, want not ready because of OOM", st)
	}

	// Traffic: every decision is made locally, within the limit of 5.
	p := s.Config().Policy("p")
	admitted := 0
	for range 20 {
		res := make([]sluice.Result, 1)
		allowed, err := s.Decide(ctx, []engine.Check{{Policy: p, Key: "k", Cost: 1}}, res)
		if err != nil || !res[0].Degraded {
			t.Fatalf("a decision with Redis refusing writes: %+v, %v; want degraded, decided locally", res[0], err)
		}
		if allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("%d of 20 admitted locally, want the limit of 5", admitted)
	}
	if st := s.Ready(ctx); st.Ready || st.Breaker == "closed" {
		t.Fatalf("Ready under failing traffic: %+v, want not ready with the breaker open", st)
	} else {
		t.Logf("Ready under failing traffic: %+v", st)
	}
	if got := metric(t, s, "sluice_store_errors_total", "cause", observe.CauseError); got < 2 {
		t.Errorf(`sluice_store_errors_total{cause="error"} = %v, want at least the 2 that opened the breaker`, got)
	}
	if out := logs.String(); !strings.Contains(out, "store call failed") || !strings.Contains(out, "OOM") {
		t.Errorf("the refused writes are not logged with their cause:\n%s", out)
	}

	if _, err := r.Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
	st = eventually("ready after Redis takes writes again", true)
	if st.Breaker != "closed" {
		t.Fatalf("ready with the breaker %s", st.Breaker)
	}
}
