package service

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
)

func parsed(t *testing.T, file, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(file, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestApplyDynamic: a dynamic configuration is merged over the files', stays
// merged across reloads of the files, and one that clashes with them leaves
// the configuration in force as it was.
func TestApplyDynamic(t *testing.T) {
	edge := func(limit string) string {
		return "domain: edge\ndescriptors: [{key: user, rate_limit: {unit: minute, requests_per_unit: " + limit + "}}]"
	}
	files := parsed(t, "edge.yaml", edge("1"))
	s := New(storestack.Of(memory.New()), files, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))

	if err := s.ApplyDynamic(parsed(t, "xds:edge", edge("7"))); err != nil {
		t.Fatal(err)
	}
	if got := limitOf(s, "edge.user"); got != 7 {
		t.Fatalf("edge.user %d after ApplyDynamic, want the dynamic 7", got)
	}
	// A reload of the files keeps the dynamic domain over theirs.
	both := func() (*config.Config, error) {
		cfg := parsed(t, "edge.yaml", edge("2"))
		other := parsed(t, "other.yaml", "policies: [{name: other, algorithm: gcra, limit: 3, period: 1s}]")
		return config.Overlay(cfg, other)
	}
	if err := s.Reload(both); err != nil {
		t.Fatal(err)
	}
	if limitOf(s, "edge.user") != 7 || limitOf(s, "other") != 3 {
		t.Fatalf("after reload: edge.user %d, other %d; want 7 and 3", limitOf(s, "edge.user"), limitOf(s, "other"))
	}
	// A clash keeps what is in force.
	before := s.Config()
	clash := parsed(t, "xds:x", "domain: x\ndescriptors: []")
	clash.Policies["other"] = before.Policy("edge.user")
	if err := s.ApplyDynamic(clash); err == nil {
		t.Fatal("a clashing dynamic configuration was applied")
	}
	if s.Config() != before {
		t.Fatal("a rejected dynamic configuration changed the one in force")
	}
	// A reload that clashes with the dynamic configuration is a failed reload.
	failures := metric(t, s, "sluice_config_reloads_total", "result", "failure")
	if err := s.Reload(func() (*config.Config, error) {
		return parsed(t, "p.yaml", "policies: [{name: edge.user, algorithm: gcra, limit: 3, period: 1s}]"), nil
	}); err == nil || s.Config() != before {
		t.Fatalf("a reload clashing with the dynamic configuration: %v", err)
	}
	if got := metric(t, s, "sluice_config_reloads_total", "result", "failure"); got != failures+1 {
		t.Errorf("failed reloads %v, want %v", got, failures+1)
	}
	// An empty dynamic configuration gives the files' domain back.
	empty, _ := config.ParseDocuments()
	if err := s.ApplyDynamic(empty); err != nil || limitOf(s, "edge.user") != 2 {
		t.Fatalf("after dropping the dynamic domain: %v, edge.user %d, want the files' 2", err, limitOf(s, "edge.user"))
	}
}
