package sluice_test

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// peekFirst is the plain reading of Reserve's contract: peek at what is
// left, grant min(max(upTo, cost), left, capacity), at least cost, and admit
// that (or give the exact denial of cost).
func peekFirst(p *sluice.Policy, s sluice.State, now, cost, upTo int64) (sluice.State, sluice.Result, int64) {
	_, peek := sluice.Decide(p, s, now, 0)
	grant := max(min(max(upTo, cost), peek.Remaining, p.Capacity()), cost)
	next, res := sluice.Decide(p, s, now, grant)
	if !res.Allowed {
		_, res = sluice.Decide(p, s, now, cost)
		return s, res, 0
	}
	return next, res, grant
}

// Reserve decides once when all that is asked for is admitted and peeks
// only after a denial: on random traces over every reservable algorithm it
// grants what the peek-first reading grants, with the same Result and the
// same next state.
func TestReserveMatchesPeekFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, a := range []sluice.Algorithm{sluice.FixedWindow, sluice.TokenBucket, sluice.GCRA} {
		for range 40 {
			p := sluice.Policy{Name: "p", Algorithm: a, Limit: rng.Int64N(40) + 1, Period: time.Duration(rng.Int64N(2000)+1) * time.Millisecond}
			if a != sluice.FixedWindow && rng.IntN(2) == 0 {
				p.Burst = rng.Int64N(60) + 1
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			var s sluice.State
			now := int64(1_700_000_000_000_000)
			for step := range 300 {
				now += rng.Int64N(p.Period.Microseconds()/4 + 1)
				if rng.IntN(20) == 0 {
					now -= rng.Int64N(1000) // a clock that steps back
				}
				cost := rng.Int64N(min(3, p.Capacity())) + 1
				upTo := cost + rng.Int64N(p.Capacity()+2) - 1
				wantNext, want, wantGrant := peekFirst(&p, s, now, cost, upTo)
				next, r := sluice.Reserve(&p, s, now, cost, upTo)
				if r.Granted != wantGrant || r.Result != want || !reflect.DeepEqual(next, wantNext) {
					t.Fatalf("%+v step %d: Reserve(%d..%d) = %d %+v %+v, want %d %+v %+v",
						p, step, cost, upTo, r.Granted, r.Result, next, wantGrant, want, wantNext)
				}
				s = next
				if rng.IntN(3) == 0 { // spend some more, to meet the limit often
					s, _ = sluice.Decide(&p, s, now, cost)
				}
			}
		}
	}
}
