package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
)

// TestDecisionSeriesOnlyForDecidedPolicies: putting a configuration in force
// adds no series to sluice_decisions_total; a policy's series appear at its
// first decision and count it. A configuration of many policies then costs
// /metrics nothing until they decide.
func TestDecisionSeriesOnlyForDecidedPolicies(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: many\ndescriptors:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  - {key: user, value: u%d, rate_limit: {unit: minute, requests_per_unit: 2}}\n", i)
	}
	cfg, err := config.Parse("many.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	s := New(memory.New(), cfg)
	if n := testutil.CollectAndCount(s.metrics.decisions); n != 0 {
		t.Fatalf("%d sluice_decisions_total series before any decision, want 0", n)
	}
	decide1(t, s, "many.user_u7", "k", 1)
	decide1(t, s, "many.user_u7", "k", 2) // over 2 a minute: denied
	if n := testutil.CollectAndCount(s.metrics.decisions); n != 3 {
		t.Errorf("%d series after decisions of one policy, want its 3", n)
	}
	for decision, want := range map[string]float64{DecisionAllowed: 1, DecisionDenied: 1, DecisionShadowDenied: 0} {
		if got := testutil.ToFloat64(s.metrics.decisions.WithLabelValues("many.user_u7", decision)); got != want {
			t.Errorf("%s: %v, want %v", decision, got, want)
		}
	}
	// A new configuration keeps the counts: the series are the policy name's.
	if err := s.Reload(func() (*config.Config, error) { return config.Parse("many.yaml", []byte(b.String())) }); err != nil {
		t.Fatal(err)
	}
	decide1(t, s, "many.user_u7", "other", 1)
	if got := testutil.ToFloat64(s.metrics.decisions.WithLabelValues("many.user_u7", DecisionAllowed)); got != 2 {
		t.Errorf("allowed after a reload: %v, want 2", got)
	}
}
