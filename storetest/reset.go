package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testReset: a store that implements sluice.Resetter forgets exactly the
// (policy, key) it is asked to, and resetting a key it does not hold is no error.
func testReset(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		r, ok := e.h.Store.(sluice.Resetter)
		if !ok {
			t.Skip("the store does not implement sluice.Resetter")
		}
		p := sluice.Policy{Name: "r", Algorithm: a, Limit: 3, Period: time.Second}
		l := e.limiter(p)
		fresh := e.allow(l, "k", 0)
		e.allow(l, "k", 3)
		e.allow(l, "other", 3)
		if err := r.Reset(e.ctx, &p, "k"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if got := e.allow(l, "k", 0); got != fresh {
			t.Fatalf("after Reset: %+v, want the initial state %+v", got, fresh)
		}
		if got := e.allow(l, "other", 1); got.Allowed {
			t.Fatalf("Reset of k also reset another key: %+v", got)
		}
		if err := r.Reset(e.ctx, &p, "never-used"); err != nil {
			t.Fatalf("Reset of an unknown key: %v", err)
		}
	})
}
