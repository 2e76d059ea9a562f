package sluice_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// DecideInPlace keeps Decide's rules for the state it overwrites: a denial or
// a peek leaves it exactly as it was (a sliding log untrimmed, a refill time
// unmoved), an admission writes what Decide returns, and a state aged back to
// initial becomes the zero State. The Result it writes replaces every field
// of what *res held before.
func TestDecideInPlaceKeepsDecideRules(t *testing.T) {
	inPlace := func(p *sluice.Policy, st *sluice.State, now, cost int64) sluice.Result {
		res := sluice.Result{Allowed: true, Limit: -1, Remaining: -1, RetryAfter: -1, ResetAfter: -1, Delay: -1, Degraded: true}
		sluice.DecideInPlace(p, st, now, cost, &res)
		return res
	}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			p := &sluice.Policy{Name: "p", Algorithm: a, Limit: 4, Period: time.Second}
			var st sluice.State
			now := start
			for i := range 4 { // admissions, 100ms apart: the oldest log entries age first
				want, wantRes := sluice.Decide(p, st, now, 1)
				res := inPlace(p, &st, now, 1)
				if res != wantRes || !reflect.DeepEqual(st, want) {
					t.Fatalf("admission %d: in place %+v %+v, Decide %+v %+v", i, res, st, wantRes, want)
				}
				now += 100_000
			}
			// Just after the admissions, and once some of the period has
			// passed (the log trims its oldest entry, a window has turned): a
			// denial and a peek must leave the state exactly as it was.
			for _, at := range []int64{350_000, 1_050_000} {
				for _, cost := range []int64{4, 0} {
					got := st
					res := inPlace(p, &got, start+at, cost)
					want, wantRes := sluice.Decide(p, st, start+at, cost)
					if res != wantRes || !reflect.DeepEqual(got, want) {
						t.Fatalf("cost %d at +%dµs: in place %+v %+v, Decide %+v %+v", cost, at, res, got, wantRes, want)
					}
					if (!res.Allowed || cost == 0) && res.ResetAfter != 0 && !reflect.DeepEqual(got, st) {
						t.Fatalf("cost %d at +%dµs (allowed %v) changed the state: %+v, was %+v", cost, at, res.Allowed, got, st)
					}
					if at == 350_000 && cost > 0 && res.Allowed {
						t.Fatalf("cost %d at +%dµs admitted right after the limit was spent: %+v", cost, at, res)
					}
				}
			}
			// Long after: back to initial, even for a peek.
			if res := inPlace(p, &st, start+time.Hour.Microseconds(), 0); res.ResetAfter != 0 || !reflect.DeepEqual(st, sluice.State{}) {
				t.Fatalf("an hour later: %+v, state %+v, want the zero State", res, st)
			}
		})
	}
}

// A log rebuilt with LogOf decides as the log Decide built: Newest reads its
// newest entry back.
func TestLogOfRebuildsALog(t *testing.T) {
	p := &sluice.Policy{Name: "p", Algorithm: sluice.SlidingLog, Limit: 5, Period: time.Second}
	var st sluice.State
	for i, cost := range []int64{1, 2} {
		st, _ = sluice.Decide(p, st, int64(1000*(i+1)), cost)
	}
	newest, ok := st.Log.Newest()
	if !ok || newest != (sluice.LogEntry{Time: 2000, Cost: 2}) || st.Log.Len() != 2 {
		t.Fatalf("Newest of %+v: %+v %v, want the entry of cost 2 at 2000", st, newest, ok)
	}
	rebuilt := sluice.State{Count: 3, Log: sluice.LogOf(sluice.LogEntry{Time: 1000, Cost: 1}, newest)}
	for _, now := range []int64{2500, 1_000_999, 1_001_000, 1_002_000} {
		for cost := range int64(4) {
			_, want := sluice.Decide(p, st, now, cost)
			if _, got := sluice.Decide(p, rebuilt, now, cost); got != want {
				t.Fatalf("at %d cost %d: the rebuilt log gives %+v, the original %+v", now, cost, got, want)
			}
		}
	}
	if _, ok := (sluice.Log{}).Newest(); ok {
		t.Fatal("Newest of an empty log reported an entry")
	}
}
