package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writePlans(t, path, `policies:
  - name: api
    algorithm: gcra
    limit: 10
    period: 1m
    plans:
      default: free
      limits:
        free: {limit: 100}
        pro: {limit: 1000, period: 1s, burst: 50}
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy("api")
	for plan, want := range map[string][3]int64{
		"pro":  {1000, int64(time.Second), 50},
		"free": {100, int64(time.Minute), 0},
		"":     {100, int64(time.Minute), 0}, // the default
		"gold": {100, int64(time.Minute), 0}, // unknown: the default
	} {
		sp := p.ForPlan(plan)
		if got := [3]int64{sp.Limit, int64(sp.Period), sp.Burst}; got != want || sp.Name != "api" || sp.Algorithm != p.Algorithm {
			t.Errorf("ForPlan(%q) = %+v, want %v", plan, sp, want)
		}
	}
	noDefault := *p
	noDefault.Plans = &Plans{Limits: p.Plans.Limits}
	if sp := noDefault.ForPlan("gold"); sp.Limit != 10 {
		t.Errorf("an unknown plan without a default: limit %d, want the policy's 10", sp.Limit)
	}
}

func TestPlansInvalid(t *testing.T) {
	for body, want := range map[string]string{
		"default: gold\n      limits:\n        free: {limit: 1}":      `names no plan of limits: "gold"`,
		"limits:\n        free: {limit: 0}":                           "limits.free.limit: must be at least 1",
		"limits:\n        free: {limit: 5, burst: 2}":                 "burst",
		"limits:\n        free: {limit: 5, perod: 1s}":                "did you mean period?",
		"limits:\n        free: {limit: 5}\n        free: {limit: 6}": "duplicate plan",
		"limits:\n        'a b': {limit: 5}":                          "may hold only letters",
		"default: free":                                               "limits: required field is missing",
		"limits: [free]":                                              "must be a mapping of plan names",
	} {
		path := filepath.Join(t.TempDir(), "sluice.yaml")
		writePlans(t, path, "policies:\n  - name: api\n    algorithm: fixed_window\n    limit: 10\n    period: 1m\n    plans:\n      "+body+"\n")
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", body, err, want)
		}
	}
}

func writePlans(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
