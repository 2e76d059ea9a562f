package tracing_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/engine"
)

// TestChargeThroughTracedStore: the server charges through the traced
// store (engine.Charge on a stack with tracing on), which records a
// sluice.store/Charge span per charge and a ChargeAll span for several; the
// charge is the store's, owing included.
func TestChargeThroughTracedStore(t *testing.T) {
	svc, rec := traced(t, memoryStack, false)
	cfg := svc.Config()
	checks := []engine.Check{{Policy: cfg.Policy("per_user"), Key: secretKey, Cost: 5}}
	results := make([]sluice.Result, 1)
	if err := svc.Charge(context.Background(), checks, results); err != nil || results[0].Remaining != -3 {
		t.Fatalf("charge of 5 on a limit of 2: %+v, %v; want remaining -3", results[0], err)
	}
	checks = []engine.Check{
		{Policy: cfg.Policy("per_user"), Key: "bob", Cost: 1},
		{Policy: cfg.Policy("per_user_shadow"), Key: "bob", Cost: 2},
	}
	results = make([]sluice.Result, 2)
	if err := svc.Charge(context.Background(), checks, results); err != nil || results[0].Remaining != 1 || results[1].Remaining != -1 {
		t.Fatalf("two charges: %+v, %v", results, err)
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 2 || names[0] != "sluice.store/Charge" || names[1] != "sluice.store/ChargeAll" {
		t.Fatalf("spans %q, want one Charge and one ChargeAll", names)
	}
	noKeys(t, rec.Ended(), secretKey)
}
