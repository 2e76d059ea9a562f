package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decide"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func policy(name string, limit int64, opts ...func(*config.Policy)) *config.Policy {
	p := &config.Policy{Policy: sluice.Policy{Name: name, Algorithm: sluice.FixedWindow, Limit: limit, Period: time.Minute}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func shadow(p *config.Policy) { p.Shadow = true }
func quota(p *config.Policy)  { p.Shadow, p.QuotaMode = true, true }

// newEngine is an engine on store and its observer.
func newEngine(store sluice.Store) (*engine.Engine, *observe.Observer) {
	obs := observe.New("test", slog.New(slog.DiscardHandler), nil)
	return engine.New(storestack.Of(store), obs, nil), obs
}

func memoryStore() sluice.Store {
	return memory.New(memory.WithClock(storetest.NewClock(storetest.Epoch)))
}

// counted reads one series of the observer's registry.
func counted(t *testing.T, obs *observe.Observer, name, label, value string) float64 {
	t.Helper()
	mfs, err := obs.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestContracts: a cost above its limit's capacity is the HTTP API's
// client error, and Envoy's denial (counted, nothing charged); a quota-mode
// policy is a soft limit only under Envoy's contract.
func TestContracts(t *testing.T) {
	e, obs := newEngine(memoryStore())
	ctx := context.Background()
	small, other := policy("small", 2), policy("other", 5)
	req := func(envoy bool) *engine.Request {
		return &engine.Request{
			Checks:           []engine.Check{{Policy: small, Key: "k", Cost: 3}, {Policy: other, Key: "k", Cost: 1}},
			Results:          make([]sluice.Result, 2),
			DenyOverCapacity: envoy, QuotaMode: envoy,
		}
	}
	if err := e.DecideRequest(ctx, req(false)); !errors.Is(err, sluice.ErrExceedsCapacity) {
		t.Fatalf("HTTP contract: %v, want ErrExceedsCapacity", err)
	}
	r := req(true)
	if err := e.DecideRequest(ctx, r); err != nil || r.Allowed || !r.Blocked || r.Checks[0].Flags&decide.Exhausted == 0 || r.Results[1].Remaining != 5 {
		t.Fatalf("Envoy contract: %v %+v", err, r)
	}
	if got := counted(t, obs, "sluice_decisions_total", "policy", "small"); got != 1 {
		t.Errorf("the denial over capacity counted %v times, want once", got)
	}

	q := policy("q", 1, quota)
	for i, want := range []bool{true, true, true} {
		r := &engine.Request{Checks: []engine.Check{{Policy: q, Key: "k", Cost: 1}}, Results: make([]sluice.Result, 1)}
		if err := e.DecideRequest(ctx, r); err != nil || r.Allowed != want {
			t.Fatalf("quota-mode policy under the HTTP contract, request %d: %v %+v", i, err, r)
		}
	}
	r = &engine.Request{Checks: []engine.Check{{Policy: q, Key: "k", Cost: 1}}, Results: make([]sluice.Result, 1), QuotaMode: true}
	if err := e.DecideRequest(ctx, r); err != nil || r.Allowed || !r.Blocked {
		t.Fatalf("quota-mode policy under Envoy's contract, its quota gone: %v %+v", err, r)
	}
}

// TestShadowFailure: a shadow check the store fails changes nothing of the
// decision; the failure is counted and logged as a store error, and the
// check counts no decision.
func TestShadowFailure(t *testing.T) {
	e, obs := newEngine(&failingFor{Store: memoryStore(), policy: "trial"})
	enforced, trial := policy("enforced", 5), policy("trial", 5, shadow)
	checks := []engine.Check{{Policy: enforced, Key: "k", Cost: 1}, {Policy: trial, Key: "k", Cost: 1}}
	allowed, err := e.Decide(context.Background(), checks, make([]sluice.Result, 2))
	if err != nil || !allowed {
		t.Fatalf("%v %v, want admitted", allowed, err)
	}
	if got := counted(t, obs, "sluice_store_errors_total", "cause", observe.CauseError); got != 1 {
		t.Errorf("store errors %v, want 1", got)
	}
	if got := counted(t, obs, "sluice_decisions_total", "policy", "trial"); got != 0 {
		t.Errorf("the failed shadow check counted %v decisions", got)
	}
	if got := counted(t, obs, "sluice_decisions_total", "policy", "enforced"); got != 1 {
		t.Errorf("the enforced check counted %v decisions, want 1", got)
	}
}

// failingFor fails the calls for one policy.
type failingFor struct {
	sluice.Store
	policy string
}

func (f *failingFor) Decide(ctx context.Context, r sluice.Request) (sluice.Result, error) {
	if r.Policy.Name == f.policy {
		return sluice.Result{}, errors.New("OOM command not allowed")
	}
	return f.Store.Decide(ctx, r)
}

// TestResolveKeepsPolicy: Decide resolves a check under its plan, reports
// the limit applied in Limit, and counts under the configured policy.
func TestResolveKeepsPolicy(t *testing.T) {
	e, obs := newEngine(memoryStore())
	p := policy("p", 1, func(p *config.Policy) {
		p.Plans = &config.Plans{Limits: map[string]config.PlanLimit{"pro": {Limit: 4, Period: time.Minute}}}
	})
	checks := []engine.Check{{Policy: p, Key: "k", Cost: 1, Plan: "pro"}}
	res := make([]sluice.Result, 1)
	if _, err := e.Decide(context.Background(), checks, res); err != nil {
		t.Fatal(err)
	}
	if checks[0].Limit == nil || checks[0].Limit.Limit != 4 || checks[0].Policy != p || res[0].Limit != 4 {
		t.Fatalf("resolved %+v, result %+v: want the pro plan's limit of 4 on policy p", checks[0].Limit, res[0])
	}
	if got := counted(t, obs, "sluice_decisions_total", "policy", "p"); got != 1 {
		t.Errorf("counted %v under p, want 1", got)
	}
}
