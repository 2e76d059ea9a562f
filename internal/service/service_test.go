package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func policyFile(limit int) string {
	return fmt.Sprintf("policies:\n  - name: p\n    algorithm: fixed_window\n    limit: %d\n    period: 1m\n", limit)
}

func newTestService(t *testing.T, paths ...string) (*Service, func() (*config.Config, error)) {
	t.Helper()
	load := func() (*config.Config, error) { return config.Load(paths...) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	return New(storestack.Of(memory.New(memory.WithClock(clock))), cfg), load
}

// decide1 decides one check of policy name for key.
func decide1(t *testing.T, s *Service, name, key string, cost int64) sluice.Result {
	t.Helper()
	p := s.Config().Policy(name)
	if p == nil {
		t.Fatalf("no policy %q", name)
	}
	res := make([]sluice.Result, 1)
	if _, err := s.Decide(context.Background(), []engine.Check{{Policy: p, Key: key, Cost: cost}}, res); err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func TestReloadKeepsCountersAndRejectsInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, policyFile(3))
	s, load := newTestService(t, path)
	decide1(t, s, "p", "k", 2)

	write(t, path, policyFile(5))
	if err := s.Reload(load); err != nil {
		t.Fatal(err)
	}
	if r := decide1(t, s, "p", "k", 0); r.Limit != 5 || r.Remaining != 3 {
		t.Fatalf("after raising the limit to 5: %+v, want the 2 units used before the reload kept (3 left)", r)
	}

	write(t, path, policyFile(0))
	if err := s.Reload(load); err == nil {
		t.Fatal("a limit of 0 was accepted")
	}
	if r := decide1(t, s, "p", "k", 0); r.Limit != 5 {
		t.Fatalf("an invalid file replaced the configuration: %+v", r)
	}
	if got := metric(t, s, "sluice_config_reloads_total", "result", "failure"); got != 1 {
		t.Fatalf("failed reloads counted: %v", got)
	}
	if got := metric(t, s, "sluice_config_reloads_total", "result", "success"); got != 1 {
		t.Fatalf("successful reloads counted: %v", got)
	}
}

func watch(t *testing.T, s *Service, paths []string, load func() (*config.Config, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	watching := make(chan struct{})
	go func() { done <- s.watch(ctx, paths, nil, load, func() { close(watching) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	// The test changes files only once the watcher cannot miss it.
	select {
	case <-watching:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("Watch returned before watching: %v", err)
	}
}

func TestWatchEditAndInvalidEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, policyFile(3))
	s, load := newTestService(t, path)
	watch(t, s, []string{path}, load)

	write(t, path, policyFile(7))
	testwait.Until(t, "the edit is in force", func() bool { return s.Config().Policy("p").Limit == 7 })

	write(t, path, "policies:\n  - name: p\n    algoritm: gcra\n")
	testwait.Until(t, "the invalid edit is counted", func() bool {
		return metric(t, s, "sluice_config_reloads_total", "result", "failure") == 1
	})
	if got := s.Config().Policy("p").Limit; got != 7 {
		t.Fatalf("the invalid edit replaced the configuration (limit %d)", got)
	}
}

// TestWatchConfigMapSwap reproduces how the kubelet updates a mounted
// ConfigMap: the file is a symlink through ..data, and an update writes a new
// timestamped directory and renames a new ..data link over the old one. The
// file's own path never sees a write event.
func TestWatchConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	mkVersion := func(name string, limit int) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "sluice.yaml"), policyFile(limit))
	}
	mkVersion("..2026_11_22_01", 3)
	must(t, os.Symlink("..2026_11_22_01", filepath.Join(dir, "..data")))
	must(t, os.Symlink(filepath.Join("..data", "sluice.yaml"), filepath.Join(dir, "sluice.yaml")))
	path := filepath.Join(dir, "sluice.yaml")
	s, load := newTestService(t, path)
	watch(t, s, []string{path}, load)

	mkVersion("..2026_11_22_02", 9)
	must(t, os.Symlink("..2026_11_22_02", filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(t, os.RemoveAll(filepath.Join(dir, "..2026_11_22_01")))
	testwait.Until(t, "the swapped ConfigMap is in force", func() bool { return s.Config().Policy("p").Limit == 9 })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDecideShadowAndErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, `policies:
  - {name: enforced, algorithm: fixed_window, limit: 2, period: 1m}
  - {name: shadow, algorithm: fixed_window, limit: 1, period: 1m, shadow: true}
`)
	s, _ := newTestService(t, path)
	cfg := s.Config()
	both := []engine.Check{{Policy: cfg.Policy("enforced"), Key: "k", Cost: 1}, {Policy: cfg.Policy("shadow"), Key: "k", Cost: 1}}
	res := make([]sluice.Result, 2)
	for i, want := range []struct{ allowed, shadowAllowed bool }{{true, true}, {true, false}, {false, false}} {
		allowed, err := s.Decide(context.Background(), both, res)
		if err != nil {
			t.Fatal(err)
		}
		if allowed != want.allowed || res[1].Allowed != want.shadowAllowed {
			t.Fatalf("request %d: allowed %v shadow %+v, want %v/%v", i, allowed, res[1], want.allowed, want.shadowAllowed)
		}
	}
	counts := map[string]float64{}
	for _, d := range []string{observe.DecisionAllowed, observe.DecisionDenied, observe.DecisionShadowDenied} {
		counts[d] = metric(t, s, "sluice_decisions_total", "policy", "shadow", "decision", d)
	}
	if counts[observe.DecisionAllowed] != 1 || counts[observe.DecisionShadowDenied] != 1 || counts[observe.DecisionDenied] != 0 {
		t.Fatalf("shadow policy counts %v", counts)
	}
	// The third request was denied by the enforced policy: the shadow policy
	// was only peeked at, so it holds the first request's unit alone.
	if r := decide1(t, s, "shadow", "k", 0); r.Remaining != 0 || r.ResetAfter == 0 {
		t.Fatalf("shadow state: %+v", r)
	}

	var ce *engine.CheckError
	dup := []engine.Check{both[0], both[0]}
	if _, err := s.Decide(context.Background(), dup, res); !errors.As(err, &ce) || ce.Index != 1 || !errors.Is(err, sluice.ErrDuplicateCheck) {
		t.Fatalf("duplicate check: %v", err)
	}
	empty := []engine.Check{{Policy: cfg.Policy("enforced"), Key: "", Cost: 1}}
	if _, err := s.Decide(context.Background(), empty, res[:1]); !errors.Is(err, sluice.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
}

// TestDecideDeniesAll: an Envoy file's requests_per_unit: 0 denies every
// request without reaching the store, and charges nothing elsewhere.
func TestDecideDeniesAll(t *testing.T) {
	dir := t.TempDir()
	native, envoy := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "e.yaml")
	write(t, native, policyFile(5))
	write(t, envoy, "domain: d\ndescriptors:\n  - key: user\n    value: banned\n    rate_limit: {unit: minute, requests_per_unit: 0}\n")
	s, _ := newTestService(t, native, envoy)
	var ban *config.Policy
	for _, p := range s.Config().Policies {
		if p.DeniesAll() {
			ban = p
		}
	}
	checks := []engine.Check{{Policy: s.Config().Policy("p"), Key: "k", Cost: 1}, {Policy: ban, Key: "banned", Cost: 1}}
	res := make([]sluice.Result, 2)
	allowed, err := s.Decide(context.Background(), checks, res)
	if err != nil || allowed || res[0].Allowed || res[0].Remaining != 5 || res[1].Allowed || res[1].Remaining != 0 {
		t.Fatalf("allowed %v err %v results %+v", allowed, err, res)
	}
	if r := decide1(t, s, "p", "k", 0); r.Remaining != 5 {
		t.Fatalf("the denied request was charged: %+v", r)
	}
}

// A reload that removes a fair-share policy, or makes it an ordinary one,
// drops its shares: its sluice_fair_share_* series are no longer reported.
func TestReloadForgetsShares(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	fair := func(name, share string) string {
		return fmt.Sprintf("  - {name: %s, algorithm: gcra, limit: 100, period: 1s%s}\n", name, share)
	}
	write(t, path, "policies:\n"+fair("a", ", share: fair")+fair("b", ", share: fair"))
	s, load := newTestService(t, path)
	for _, name := range []string{"a", "b"} {
		decide1(t, s, name, "tenant", 1)
	}
	series := func() []string {
		var out []string
		for _, st := range s.Shares().Stats() {
			out = append(out, st.Policy)
		}
		return out
	}
	if got := series(); !slices.Equal(got, []string{"a", "b"}) || metric(t, s, "sluice_fair_share_level", "policy", "b") != 100 {
		t.Fatalf("before the reload: shares of %v, want a and b", got)
	}
	for _, file := range []string{fair("a", ", share: fair") + fair("b", ""), fair("a", ", share: fair")} {
		write(t, path, "policies:\n"+file)
		if err := s.Reload(load); err != nil {
			t.Fatal(err)
		}
		if got := series(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("after reloading\n%s: shares of %v, want a's alone", file, got)
		}
	}
	decide1(t, s, "a", "tenant", 1)
	if got := metric(t, s, "sluice_fair_share_level", "policy", "a"); got != 100 {
		t.Fatalf("a's level after the reloads: %v, want 100", got)
	}
}
