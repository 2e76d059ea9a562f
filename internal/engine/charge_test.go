package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

// TestCharge: a charge is recorded under the limit the key is decided
// under (here its plan's), even beyond it, and observed once per check in
// sluice_charged_units_total and, when it leaves the key owing,
// sluice_charges_owing_total; the next decision is denied.
func TestCharge(t *testing.T) {
	e, obs := newEngine(memoryStore())
	tiered := policy("tiered", 10, func(p *config.Policy) {
		p.Plans = &config.Plans{Default: "free", Limits: map[string]config.PlanLimit{"pro": {Limit: 100, Period: time.Minute}}}
	})
	ctx := context.Background()
	results := make([]sluice.Result, 2)
	checks := []engine.Check{{Policy: tiered, Key: "acme", Cost: 150, Plan: "pro"}, {Policy: policy("other", 5), Key: "acme", Cost: 3}}
	if err := e.Charge(ctx, checks, results); err != nil {
		t.Fatal(err)
	}
	if results[0].Limit != 100 || results[0].Remaining != -50 || results[0].Allowed || !results[1].Allowed || results[1].Remaining != 2 {
		t.Fatalf("charges: %+v", results)
	}
	if got := counted(t, obs, "sluice_charged_units_total", "policy", "tiered"); got != 150 {
		t.Fatalf("sluice_charged_units_total{tiered} %v, want 150", got)
	}
	if got := counted(t, obs, "sluice_charges_owing_total", "policy", "tiered"); got != 1 {
		t.Fatalf("sluice_charges_owing_total{tiered} %v, want 1", got)
	}
	if got := counted(t, obs, "sluice_charges_owing_total", "policy", "other"); got != 0 {
		t.Fatalf("sluice_charges_owing_total{other} %v, want 0", got)
	}
	check := []engine.Check{{Policy: tiered, Key: "acme", Cost: 1, Plan: "pro"}}
	if ok, err := e.Decide(ctx, check, make([]sluice.Result, 1)); err != nil || ok {
		t.Fatalf("a decision while the key owes: %v, %v; want denied", ok, err)
	}
}

// TestChargeInvalid: an invalid charge is a *CheckError wrapping the
// library's error, and charges nothing.
func TestChargeInvalid(t *testing.T) {
	e, obs := newEngine(memoryStore())
	p := policy("p", 10)
	conc := policy("c", 2, func(p *config.Policy) { p.Algorithm = sluice.Concurrency })
	for _, c := range []struct {
		checks []engine.Check
		want   error
	}{
		{[]engine.Check{{Policy: p, Key: "", Cost: 1}}, sluice.ErrInvalidKey},
		{[]engine.Check{{Policy: p, Key: "k", Cost: -1}}, sluice.ErrInvalidCost},
		{[]engine.Check{{Policy: conc, Key: "k", Cost: 1}}, sluice.ErrAcquireOnly},
		{[]engine.Check{{Policy: p, Key: "k", Cost: 1}, {Policy: p, Key: "k", Cost: 2}}, sluice.ErrDuplicateCheck},
	} {
		err := e.Charge(context.Background(), c.checks, make([]sluice.Result, len(c.checks)))
		var ce *engine.CheckError
		if !errors.As(err, &ce) || !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want a CheckError wrapping %v", c.checks, err, c.want)
		}
	}
	if got := counted(t, obs, "sluice_charged_units_total", "policy", "p"); got != 0 {
		t.Fatalf("invalid charges counted %v units", got)
	}
}
