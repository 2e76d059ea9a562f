package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// TestSetPolicies: a policy's own settings override the store's, Off sends
// every decision to the remote store, and WithOff leases only the policies
// that ask for it.
func TestSetPolicies(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := lease.New(newMemory(clock), lease.WithClock(clock), lease.WithTTL(10*time.Millisecond), lease.WithMaxLease(50))
	own := sluice.Policy{Name: "own", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Second}
	off := sluice.Policy{Name: "off", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Second}
	other := sluice.Policy{Name: "other", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Second}
	s.SetPolicies(map[string]lease.Settings{"own": {TTL: 40 * time.Millisecond, MaxLease: 5}, "off": {Off: true}})
	if got := s.TTL(&own); got != 40*time.Millisecond {
		t.Errorf("own TTL %v, want 40ms", got)
	}
	if got := s.MaxLease(&own); got != 5 {
		t.Errorf("own MaxLease %d, want 5", got)
	}
	if got, want := s.Bound(&own), 1+0.04/1.0; got != want {
		t.Errorf("own Bound %v, want %v", got, want)
	}
	if s.TTL(&off) != 0 || s.Bound(&off) != 1 || s.Stranded(&off) != 0 {
		t.Errorf("off: TTL %v, Bound %v, Stranded %d, want 0, 1, 0", s.TTL(&off), s.Bound(&off), s.Stranded(&off))
	}
	if s.TTL(&other) != 10*time.Millisecond || s.MaxLease(&other) != 50 {
		t.Errorf("other: TTL %v MaxLease %d, want the store's 10ms and 50", s.TTL(&other), s.MaxLease(&other))
	}
	calls := func(p sluice.Policy, n int) int64 {
		before := s.Stats().StoreCalls
		for i := range n {
			res, err := s.Decide(context.Background(), sluice.Request{Policy: &p, Key: "k", Cost: 1})
			if err != nil || !res.Allowed {
				t.Fatalf("%s request %d: %+v %v", p.Name, i, res, err)
			}
		}
		return s.Stats().StoreCalls - before
	}
	if c := calls(off, 20); c != 20 {
		t.Errorf("off: %d store calls for 20 decisions, want 20", c)
	}
	if c := calls(own, 20); c < 4 || c > 10 { // leases of at most 5 units
		t.Errorf("own: %d store calls for 20 decisions, want 4 to 10 (max_lease 5)", c)
	}
	if held := s.Stats().Held; held < 0 || held > 5 {
		t.Errorf("held %d units, want 0 to 5", held)
	}

	optIn := lease.New(newMemory(clock), lease.WithClock(clock), lease.WithOff())
	if optIn.TTL(&other) != 0 {
		t.Errorf("WithOff: other TTL %v, want 0", optIn.TTL(&other))
	}
	optIn.SetPolicies(map[string]lease.Settings{"own": {}})
	if got := optIn.TTL(&own); got != 50*time.Millisecond { // a twentieth of B·T = 1s
		t.Errorf("WithOff, own {}: TTL %v, want the default 50ms", got)
	}
	optIn.SetPolicies(nil)
	if optIn.TTL(&own) != 0 {
		t.Errorf("WithOff after SetPolicies(nil): own TTL %v, want 0", optIn.TTL(&own))
	}
}
