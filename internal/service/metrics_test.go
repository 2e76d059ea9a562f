package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/storestack"
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
	s := New(storestack.Of(memory.New()), cfg)
	if n := series(t, s, "sluice_decisions_total"); n != 0 {
		t.Fatalf("%d sluice_decisions_total series before any decision, want 0", n)
	}
	decide1(t, s, "many.user_u7", "k", 1)
	decide1(t, s, "many.user_u7", "k", 2) // over 2 a minute: denied
	if n := series(t, s, "sluice_decisions_total"); n != 3 {
		t.Errorf("%d series after decisions of one policy, want its 3", n)
	}
	for decision, want := range map[string]float64{observe.DecisionAllowed: 1, observe.DecisionDenied: 1, observe.DecisionShadowDenied: 0} {
		if got := metric(t, s, "sluice_decisions_total", "policy", "many.user_u7", "decision", decision); got != want {
			t.Errorf("%s: %v, want %v", decision, got, want)
		}
	}
	// A new configuration keeps the counts: the series are the policy name's.
	if err := s.Reload(func() (*config.Config, error) { return config.Parse("many.yaml", []byte(b.String())) }); err != nil {
		t.Fatal(err)
	}
	decide1(t, s, "many.user_u7", "other", 1)
	if got := metric(t, s, "sluice_decisions_total", "policy", "many.user_u7", "decision", observe.DecisionAllowed); got != 2 {
		t.Errorf("allowed after a reload: %v, want 2", got)
	}
}
