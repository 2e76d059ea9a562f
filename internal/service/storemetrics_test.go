package service

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testwait"
)

// scrape reads the service's metrics over HTTP, as Prometheus would:
// "name{labels}" to value.
func scrape(t *testing.T, s *Service) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(s.Registry(), promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func decideN(t *testing.T, s *Service, p *config.Policy, keys, n int) {
	t.Helper()
	results := make([]sluice.Result, 1)
	for i := range n {
		ok, err := s.Decide(context.Background(), []engine.Check{{Policy: p, Key: fmt.Sprint("k", i%keys), Cost: 1}}, results)
		if err != nil || !ok {
			t.Fatalf("%s request %d: allowed %v, %v", p.Name, i, ok, err)
		}
	}
}

// TestLeaseMetrics: with leases, /metrics shows each policy's bound (its own
// lease section, the store's default, off), the lease layer's decisions,
// store calls and held units, and the local fallback's memory metrics; a
// reload changing a policy's TTL changes its bound.
func TestLeaseMetrics(t *testing.T) {
	srv := redistest.Start(t)
	// gcra 6000/min: B·T = 60s, so a 3s TTL gives a bound of 1.05.
	file := func(ttl string) *config.Config {
		c, err := config.Parse("c.yaml", []byte(fmt.Sprintf(`store:
  url: %s
  lease: {ttl: 600ms}
policies:
  - {name: own, algorithm: gcra, limit: 6000, period: 1m, lease: {ttl: %s, max_lease: 20}}
  - {name: default, algorithm: gcra, limit: 6000, period: 1m}
  - {name: exact, algorithm: token_bucket, limit: 6000, period: 1m, lease: off}
  - {name: window, algorithm: fixed_window, limit: 6000, period: 1m}
`, srv.URL(), ttl)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cfg := file("3s")
	if err := storestack.Check(cfg, cfg.Store); err != nil {
		t.Fatal(err)
	}
	st, err := storestack.Open(cfg.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(st, cfg)
	const n = 200
	decideN(t, s, cfg.Policies["own"], 1, n)
	// A lease renewed in the background may still be on its way to Redis:
	// wait until every store call the lease layer made has been timed.
	var m map[string]float64
	testwait.Until(t, "every lease store call timed", func() bool {
		m = scrape(t, s)
		return m["sluice_store_call_duration_seconds_count"] == m["sluice_lease_store_calls_total"]
	})
	for policy, want := range map[string]float64{"own": 1.05, "default": 1.01, "exact": 1, "window": 1} {
		if got := m[`sluice_lease_bound{policy="`+policy+`"}`]; got != want {
			t.Errorf("sluice_lease_bound of %s = %v, want %v", policy, got, want)
		}
	}
	calls := m["sluice_lease_store_calls_total"]
	t.Logf("%v store calls for %v decisions, %v units held", calls, m["sluice_lease_decisions_total"], m["sluice_lease_held_units"])
	if m["sluice_lease_decisions_total"] != n || calls < n/20 || calls >= n/2 { // leases of at most 20 units
		t.Errorf("%v decisions and %v store calls, want %d decisions and %d to %d calls", m["sluice_lease_decisions_total"], calls, n, n/20, n/2)
	}
	// Decisions from a lease never reach the fail-over layer: it times
	// exactly the lease layer's calls to Redis, not the decisions.
	if timed := m["sluice_store_call_duration_seconds_count"]; timed != calls {
		t.Errorf("%v store calls timed for %v lease store calls (%d decisions)", timed, calls, n)
	}
	if held := m["sluice_lease_held_units"]; held < 0 || held > 20 || m["sluice_lease_leases"] != 1 {
		t.Errorf("%v leases holding %v units, want 1 holding at most 20", m["sluice_lease_leases"], held)
	}
	if _, ok := m[`sluice_memory_max_keys{store="local"}`]; !ok {
		t.Error("no sluice_memory_max_keys for the local fallback")
	}
	if _, ok := m[`sluice_memory_keys{store="memory"}`]; ok {
		t.Error("sluice_memory_keys{store=memory} on a Redis store")
	}

	if err := s.Reload(func() (*config.Config, error) { return file("6s"), nil }); err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, s)[`sluice_lease_bound{policy="own"}`]; got != 1.1 {
		t.Errorf("after a reload to ttl 6s: bound %v, want 1.1", got)
	}
}

// TestMemoryMetrics: the memory store's keys, bytes and bounds are on
// /metrics, and no lease metric is.
func TestMemoryMetrics(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("store: {max_keys: 5000}\npolicies:\n  - {name: p, algorithm: gcra, limit: 10, period: 1m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := storestack.Open(cfg.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(st, cfg)
	decideN(t, s, cfg.Policies["p"], 7, 7)
	m := scrape(t, s)
	if m[`sluice_memory_keys{store="memory"}`] != 7 || m[`sluice_memory_max_keys{store="memory"}`] != 5000 {
		t.Errorf("memory keys %v of %v, want 7 of 5000", m[`sluice_memory_keys{store="memory"}`], m[`sluice_memory_max_keys{store="memory"}`])
	}
	if m[`sluice_memory_bytes{store="memory"}`] <= 0 {
		t.Errorf("memory bytes %v, want some", m[`sluice_memory_bytes{store="memory"}`])
	}
	for _, name := range []string{`sluice_memory_evictions_total{store="memory"}`, `sluice_memory_refused_total{store="memory"}`,
		`sluice_memory_compact_keys{store="memory"}`, `sluice_memory_spilled_total{store="memory"}`,
		`sluice_memory_demoted_total{store="memory"}`, `sluice_memory_folded_total{store="memory"}`} {
		if v, ok := m[name]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", name, v, ok)
		}
	}
	for name := range m {
		if strings.HasPrefix(name, "sluice_lease_") {
			t.Errorf("%s on the memory store", name)
		}
	}
}

// TestMemoryStoreUnderPressure: a flood of new keys that may not be forgotten
// fills the memory store's exact part; the keys after it are admitted and kept
// in its compact part, which /metrics shows (sluice_memory_spilled_total is
// what the SluiceMemoryStoreFull alert watches), and the store logs it once,
// naming itself, not once per key.
func TestMemoryStoreUnderPressure(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("store: {max_keys: 1024}\npolicies:\n  - {name: login, algorithm: sliding_log, limit: 5, period: 15m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	st, err := storestack.Open(cfg.Store, storestack.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(st, cfg)
	decideN(t, s, cfg.Policies["login"], 5000, 5000) // each admitted: 1 of 5 used, never safe to forget
	m := scrape(t, s)
	spilled, compact := m[`sluice_memory_spilled_total{store="memory"}`], m[`sluice_memory_compact_keys{store="memory"}`]
	if keys := m[`sluice_memory_keys{store="memory"}`]; keys > 1024 || spilled < 5000-1024 || compact < spilled {
		t.Errorf("%v exact keys, %v spilled, %v compact: want at most 1024 exact, the rest spilled and held", keys, spilled, compact)
	}
	if m[`sluice_memory_compact_slots{store="memory"}`] < 10*1024 || m[`sluice_memory_refused_total{store="memory"}`] != 0 {
		t.Errorf("compact slots %v, refused %v: want room for ten times the keys, none refused",
			m[`sluice_memory_compact_slots{store="memory"}`], m[`sluice_memory_refused_total{store="memory"}`])
	}
	if n := strings.Count(logs.String(), "msg=\"memory store full"); n != 1 || !strings.Contains(logs.String(), "store=memory") {
		t.Errorf("want one pressure warning naming the store, got %d:\n%s", n, &logs)
	}
}

// TestPolicyLeaseNeedsStoreLease: a policy's lease section without
// store.lease is refused, naming the policy's file and line.
func TestPolicyLeaseNeedsStoreLease(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("store: {url: 'redis://127.0.0.1:1'}\npolicies:\n  - {name: p, algorithm: gcra, limit: 10, period: 1m, lease: {ttl: 1s}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = storestack.Check(cfg, cfg.Store)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3") || !strings.Contains(err.Error(), "set store.lease") {
		t.Fatalf("got %v, want an error at c.yaml:3 asking for store.lease", err)
	}
}
