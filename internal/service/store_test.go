package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memory"
)

// syncLog is a log the goroutines under test and the test share.
type syncLog = testlog.Buffer

// TestReloadStoreChange: a reload warns that a changed store section needs
// a restart (quoting the URLs without their passwords), and does not warn
// when the section is as it was — a tls section included, which is a
// pointer in config.Store.
func TestReloadStoreChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	storeSection := func(url, ca string) string {
		return "store:\n  url: " + url + "\n  tls:\n    ca_file: " + ca + "\n" + policyFile(3)
	}
	write(t, path, storeSection("rediss://:old-pw@h:6379", "ca.pem"))
	load := func() (*config.Config, error) { return config.Load(path) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncLog{}
	s := New(storestack.Of(memory.New()), cfg, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	const warning = "the store section changed"

	if err := s.Reload(load); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), warning) {
		t.Errorf("a reload of the same file warns that the store changed:\n%s", logs)
	}

	write(t, path, storeSection("rediss://:new-pw@h:6379", "ca.pem"))
	if err := s.Reload(load); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, warning) || !strings.Contains(out, "xxxxx") {
		t.Errorf("a new store URL is not warned about:\n%s", out)
	}
	if strings.Contains(out, "old-pw") || strings.Contains(out, "new-pw") {
		t.Errorf("the warning quotes a password:\n%s", out)
	}

	before := strings.Count(logs.String(), warning)
	write(t, path, storeSection("rediss://:new-pw@h:6379", "other-ca.pem"))
	if err := s.Reload(load); err != nil {
		t.Fatal(err)
	}
	if strings.Count(logs.String(), warning) != before+1 {
		t.Errorf("a new tls.ca_file is not warned about:\n%s", logs)
	}
}

// TestDecideFailClosed: a Service on a store failing closed denies with an
// error wrapping ErrStore and failover.ErrUnavailable, fills the results as
// denied and Degraded, and counts the decision in
// sluice_store_degraded_decisions_total{on_error="closed"}; Ready reports the
// breaker and the fail policy.
func TestDecideFailClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, policyFile(3))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("redis is down")
	fs := failover.New(failingStore{down}, failover.WithMode(failover.FailClosed), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Hour}))
	logs := &syncLog{}
	s := New(&storestack.Stack{Store: fs, Failover: fs}, cfg, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	p := s.Config().Policy("p")
	for i := range 2 { // the first reaches the store, the second meets the open breaker
		res := []sluice.Result{{Allowed: true}}
		allowed, err := s.Decide(context.Background(), []engine.Check{{Policy: p, Key: "k", Cost: 1}}, res)
		if allowed || !errors.Is(err, engine.ErrStore) || !errors.Is(err, failover.ErrUnavailable) {
			t.Fatalf("decision %d: %v, %v", i, allowed, err)
		}
		if r := res[0]; r.Allowed || !r.Degraded || r.Limit != 3 {
			t.Fatalf("decision %d: result %+v", i, r)
		}
	}
	if got := metric(t, s, "sluice_store_degraded_decisions_total", "on_error", "closed"); got != 2 {
		t.Errorf(`sluice_store_degraded_decisions_total{on_error="closed"} = %v, want 2`, got)
	}
	if got := metric(t, s, "sluice_decisions_total", "policy", "p", "decision", observe.DecisionDenied); got != 2 {
		t.Errorf("denied decisions = %v, want 2", got)
	}
	// One call reached the store and failed: one error, with its cause, and
	// one log line saying it.
	if got := metric(t, s, "sluice_store_errors_total", "cause", observe.CauseError); got != 1 {
		t.Errorf(`sluice_store_errors_total{cause="error"} = %v, want 1`, got)
	}
	if out := logs.String(); strings.Count(out, "store call failed") != 1 || !strings.Contains(out, "redis is down") || !strings.Contains(out, "cause=error") {
		t.Errorf("the store failure is not logged once with its cause:\n%s", out)
	}
	st := s.Ready(context.Background())
	if st.Ready || st.Breaker != "open" || st.OnError != "closed" || !strings.Contains(st.Error, "redis is down") {
		t.Fatalf("Ready = %+v", st)
	}
}

// failingStore fails every call.
type failingStore struct{ err error }

func (f failingStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, f.err
}

func (f failingStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error {
	return f.err
}
