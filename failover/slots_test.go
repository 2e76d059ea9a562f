package failover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func (f *flaky) AcquireSlot(ctx context.Context, req sluice.Request) (sluice.Result, string, error) {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return sluice.Result{}, "", err
	}
	return f.Store.AcquireSlot(ctx, req)
}

func (f *flaky) ReleaseSlot(ctx context.Context, p *sluice.Policy, key, token string) (bool, error) {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return false, err
	}
	return f.Store.ReleaseSlot(ctx, p, key, token)
}

var slotPolicy = &sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: 4, Period: time.Minute}

func acquireSlot(t *testing.T, s sluice.SlotStore) (sluice.Result, string) {
	t.Helper()
	r, token, err := s.AcquireSlot(ctx, sluice.Request{Policy: slotPolicy, Key: "k", Cost: 1})
	if err != nil {
		t.Fatalf("AcquireSlot: %v", err)
	}
	return r, token
}

func releaseSlot(t *testing.T, s sluice.SlotStore, token string) bool {
	t.Helper()
	ok, err := s.ReleaseSlot(ctx, slotPolicy, "k", token)
	if err != nil {
		t.Fatalf("ReleaseSlot(%q): %v", token, err)
	}
	return ok
}

// FailLocal: with the primary down, slots are acquired on the local store
// under the divided limit, and every token is released where it was
// acquired, whatever the primary's health by then.
func TestSlotsFailLocal(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	local := memory.New(memory.WithClock(clock))
	s := failover.New(p, failover.WithLocal(local), failover.WithNodes(2), failover.WithClock(clock),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 100, Cooldown: time.Second}))
	r, onPrimary := acquireSlot(t, s)
	if !r.Allowed || r.Degraded || r.Remaining != 3 {
		t.Fatalf("healthy: %+v", r)
	}
	p.down.Store(true)
	var locals []string
	for i := range 2 {
		r, token := acquireSlot(t, s)
		if !r.Allowed || !r.Degraded || r.Limit != 2 || r.Remaining != int64(1-i) || !strings.HasPrefix(token, "local:") {
			t.Fatalf("down, slot %d: %+v, token %q; want the local store's, of 2", i, r, token)
		}
		locals = append(locals, token)
	}
	if r, token := acquireSlot(t, s); r.Allowed || !r.Degraded || token != "" || r.RetryAfter != time.Minute {
		t.Fatalf("down, a 3rd slot of the divided 2: %+v, %q", r, token)
	}
	if !releaseSlot(t, s, locals[0]) {
		t.Fatal("a local slot was not released while the primary is down")
	}
	if _, err := s.ReleaseSlot(ctx, slotPolicy, "k", onPrimary); err == nil {
		t.Fatal("releasing the primary's slot while it is down did not fail")
	}
	p.down.Store(false)
	if !releaseSlot(t, s, onPrimary) || releaseSlot(t, s, onPrimary) {
		t.Fatal("the primary's slot was not released exactly once once it was back")
	}
	if !releaseSlot(t, s, locals[1]) {
		t.Fatal("a local slot was not released on the local store once the primary was back")
	}
	if r, _, err := local.AcquireSlot(ctx, sluice.Request{Policy: slotPolicy, Key: "k"}); err != nil || r.Remaining != 4 {
		t.Fatalf("the local store still holds slots: %+v, %v", r, err)
	}
	if releaseSlot(t, s, "local:"+locals[1][len("local:"):]) || releaseSlot(t, s, "local:nonsense") {
		t.Fatal("a local token released twice")
	}
	if r, token := acquireSlot(t, s); !r.Allowed || r.Degraded || strings.Contains(token, ":") {
		t.Fatalf("back on the primary: %+v, %q", r, token)
	}
}

// FailOpen admits without holding a slot, and its token releases nothing;
// FailClosed denies with an UnavailableError.
func TestSlotsFailOpenClosed(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	open := failover.New(p, failover.WithMode(failover.FailOpen), failover.WithClock(clock))
	closed := failover.New(p, failover.WithMode(failover.FailClosed), failover.WithClock(clock))
	p.down.Store(true)
	r, token := acquireSlot(t, open)
	if !r.Allowed || !r.Degraded || r.Remaining != 3 || !strings.HasPrefix(token, "open:") {
		t.Fatalf("FailOpen: %+v, %q", r, token)
	}
	calls := p.calls.Load()
	if releaseSlot(t, open, token) || p.calls.Load() != calls {
		t.Fatal("FailOpen's token released a slot, or asked the primary")
	}
	_, _, err := closed.AcquireSlot(ctx, sluice.Request{Policy: slotPolicy, Key: "k", Cost: 1})
	var ue *failover.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, errDown) {
		t.Fatalf("FailClosed: %v", err)
	}
}

// A primary that holds no slots is an error, not a fail-over.
func TestSlotsNeedASlotStore(t *testing.T) {
	s := failover.New(noSlotStore{memory.New()})
	if _, _, err := s.AcquireSlot(ctx, sluice.Request{Policy: slotPolicy, Key: "k", Cost: 1}); err == nil || !strings.Contains(err.Error(), "SlotStore") {
		t.Fatalf("AcquireSlot on a primary without slots: %v", err)
	}
}

// noSlotStore hides a store's slots.
type noSlotStore struct{ m *memory.Store }

func (n noSlotStore) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	return n.m.Decide(ctx, req)
}

func (n noSlotStore) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	return n.m.DecideAll(ctx, reqs, results)
}
