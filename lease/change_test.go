package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// TestPolicyChange: a lease decided under the old numbers neither keeps
// denying after the limit is raised nor keeps admitting after it is lowered.
func TestPolicyChange(t *testing.T) {
	ctx := context.Background()
	for _, a := range []sluice.Algorithm{sluice.FixedWindow, sluice.TokenBucket, sluice.GCRA} {
		t.Run(string(a), func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			s := lease.New(newMemory(clock), lease.WithClock(clock), lease.WithTTL(time.Minute))
			low := sluice.Policy{Name: "p", Algorithm: a, Limit: 5, Period: time.Hour}
			// Raising a bucket's rate refills it faster but leaves it as
			// empty as it was; a larger burst gives room at once.
			high := low
			if a == sluice.FixedWindow {
				high.Limit = 50
			} else {
				high.Burst = 50
			}
			allow := func(p sluice.Policy) bool {
				t.Helper()
				r, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1})
				if err != nil {
					t.Fatal(err)
				}
				return r.Allowed
			}
			for range 5 {
				if !allow(low) {
					t.Fatal("denied within the limit")
				}
			}
			if allow(low) {
				t.Fatal("admitted a sixth unit of 5")
			}
			for range 4 { // the lease's cached denial is for the old limit
				if !allow(high) {
					t.Fatal("denied at once after the limit (or burst) was raised from 5 to 50")
				}
			}
			// Lowered again: 9 used of 5. The units the lease reserved under
			// 50 (it grows with use) go back, so nothing more is admitted.
			if allow(low) {
				t.Fatal("admitted at once after the limit (or burst) was lowered from 50 to 5")
			}
			peek, err := s.Decide(ctx, sluice.Request{Policy: &low, Key: "k", Cost: 0})
			if err != nil || peek.Allowed || peek.Remaining != 0 || peek.RetryAfter <= 0 {
				t.Fatalf("peek under the lowered limit: %+v, %v; want denied, nothing left", peek, err)
			}
		})
	}
}
