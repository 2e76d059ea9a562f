package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

func inflight(p *config.Policy) { p.Algorithm = sluice.Concurrency }

// TestSlots: a concurrency check acquires a slot and gets its token, counted
// in sluice_decisions_total like any decision; the slot is given back by its
// token once, and a wrong, reused or foreign token changes nothing.
func TestSlots(t *testing.T) {
	e, obs := newEngine(memoryStore())
	ctx := context.Background()
	p, rate := policy("inflight", 1, inflight), policy("rate", 5)
	decideOne := func(key string) engine.Request {
		r := engine.Request{Checks: []engine.Check{{Policy: p, Key: key, Cost: 1}, {Policy: rate, Key: key, Cost: 1}}, Results: make([]sluice.Result, 2)}
		if err := e.DecideRequest(ctx, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := decideOne("k")
	token := first.Checks[0].Token
	if !first.Allowed || token == "" || first.Checks[1].Token != "" {
		t.Fatalf("first: allowed %v, tokens %q %q", first.Allowed, token, first.Checks[1].Token)
	}
	if second := decideOne("k"); second.Allowed || second.Checks[0].Token != "" {
		t.Fatalf("second: allowed %v token %q, want denied: the slot is held", second.Allowed, second.Checks[0].Token)
	}
	other := policy("other", 1, inflight)
	for _, bad := range []struct {
		p          *config.Policy
		key, token string
	}{
		{p, "k", strings.Repeat("0", 32)}, {p, "j", token}, {other, "k", token},
	} {
		held, err := e.Release(ctx, bad.p, bad.key, "", bad.token)
		if err != nil || held {
			t.Fatalf("release %s/%s %q: %v, %v; want not held", bad.p.Name, bad.key, bad.token, held, err)
		}
	}
	if held, err := e.Release(ctx, p, "k", "", token); err != nil || !held {
		t.Fatalf("release: %v, %v", held, err)
	}
	if held, err := e.Release(ctx, p, "k", "", token); err != nil || held {
		t.Fatalf("second release: %v, %v; want not held", held, err)
	}
	if third := decideOne("k"); !third.Allowed {
		t.Fatal("denied after the release")
	}
	if got := counted(t, obs, "sluice_decisions_total", "policy", "inflight"); got != 3 {
		t.Errorf("sluice_decisions_total{policy=inflight} = %v, want 3", got)
	}
	if got := counted(t, obs, "sluice_slot_releases_total", "result", "released"); got != 1 {
		t.Errorf("releases released = %v, want 1", got)
	}
	if got := counted(t, obs, "sluice_slot_releases_total", "result", "not_held"); got != 4 {
		t.Errorf("releases not_held = %v, want 4", got)
	}
}

// TestSlotsInvalid: a cost other than 0 or 1, a release of a rate policy, an
// empty or overlong token are client errors (*engine.CheckError).
func TestSlotsInvalid(t *testing.T) {
	e, _ := newEngine(memoryStore())
	ctx := context.Background()
	p := policy("inflight", 3, inflight)
	r := engine.Request{Checks: []engine.Check{{Policy: p, Key: "k", Cost: 2}}, Results: make([]sluice.Result, 1)}
	var ce *engine.CheckError
	if err := e.DecideRequest(ctx, &r); !errors.As(err, &ce) || !errors.Is(err, sluice.ErrInvalidCost) {
		t.Errorf("cost 2: %v, want a CheckError wrapping ErrInvalidCost", err)
	}
	if _, err := e.Release(ctx, policy("rate", 3), "k", "", "t"); !errors.Is(err, sluice.ErrNotConcurrency) {
		t.Errorf("release of a rate policy: %v, want ErrNotConcurrency", err)
	}
	for _, tok := range []string{"", strings.Repeat("a", engine.MaxTokenLen+1)} {
		if _, err := e.Release(ctx, p, "k", "", tok); !errors.As(err, &ce) || !errors.Is(err, engine.ErrInvalidToken) {
			t.Errorf("token of %d bytes: %v, want ErrInvalidToken", len(tok), err)
		}
	}
}
