package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testUnknownAlgorithm: a request under a policy that skipped Validate and
// names no algorithm is never decided by another algorithm. A store may
// assume valid policies, so it may panic (Sluice's stores do, saying why) or
// return an error, but it must not answer, and must change nothing: the
// policy's name holds no consumed units under any algorithm afterwards.
func testUnknownAlgorithm(t *testing.T, open Opener) {
	e := newEnv(t, open)
	bad := sluice.Policy{Name: "unknown", Algorithm: "lottery", Limit: 2, Period: time.Second}
	req := sluice.Request{Policy: &bad, Key: "k", Cost: 1}
	for what, call := range map[string]func() (any, error){
		"Decide": func() (any, error) { return e.h.Store.Decide(e.ctx, req) },
		"DecideAll": func() (any, error) {
			res := make([]sluice.Result, 1)
			return res, e.h.Store.DecideAll(e.ctx, []sluice.Request{req}, res)
		},
	} {
		if answer, err, panicked := guard(call); err == nil && !panicked {
			t.Errorf("%s under algorithm %q: answered %+v, want a panic or an error", what, bad.Algorithm, answer)
		}
	}
	for _, a := range sluice.Algorithms {
		p := bad
		p.Algorithm, p.Burst = a, 0
		if r := e.allow(e.limiter(p), "k", 0); r.Remaining != p.Capacity() {
			t.Errorf("after the refused requests, %s holds %d of %d units, want all", a, r.Remaining, p.Capacity())
		}
	}
}

// guard runs call, reporting a panic instead of raising it.
func guard(call func() (any, error)) (answer any, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			answer, err, panicked = nil, fmt.Errorf("panic: %v", r), true
		}
	}()
	answer, err = call()
	return answer, err, false
}
