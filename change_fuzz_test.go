package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// FuzzPolicyChange switches one key between two versions of a policy (same
// name and algorithm, other limit, period and burst) at random, and checks
// what every Result must say whatever the kept state holds: Remaining within
// [0, capacity], a peek changing nothing and answering as a request of one
// unit would, a denial changing nothing and exact (denied 1µs before
// RetryAfter, admitted at it), and the key initial again at ResetAfter.
func FuzzPolicyChange(f *testing.F) {
	// Ops are (version, cost, advance) triples: each seed uses the first
	// version up, then switches to the second.
	f.Add(uint8(0), uint8(5), uint16(1000), uint8(0), uint8(3), uint16(1000), uint8(0), []byte{0, 5, 0, 1, 0, 1, 1, 1, 1})
	f.Add(uint8(3), uint8(10), uint16(1000), uint8(10), uint8(10), uint16(1000), uint8(2), []byte{0, 10, 0, 1, 0, 0, 1, 1, 1})
	f.Add(uint8(5), uint8(3), uint16(1000), uint8(0), uint8(5), uint16(1000), uint8(0), []byte{0, 3, 0, 1, 1, 0, 1, 1, 200})
	f.Add(uint8(4), uint8(10), uint16(1000), uint8(10), uint8(10), uint16(1000), uint8(2), []byte{0, 10, 0, 1, 1, 3, 1, 0, 0})
	f.Add(uint8(2), uint8(10), uint16(1000), uint8(0), uint8(4), uint16(700), uint8(0), []byte{0, 6, 0, 1, 0, 150, 1, 1, 3})
	f.Fuzz(func(t *testing.T, alg, l1 uint8, p1 uint16, b1, l2 uint8, p2 uint16, b2 uint8, ops []byte) {
		a := sluice.Algorithms[int(alg)%len(sluice.Algorithms)]
		version := func(l uint8, p uint16, b uint8) sluice.Policy {
			pol := sluice.Policy{Name: "f", Algorithm: a, Limit: int64(l%20) + 1, Period: time.Duration(p%2000+1) * time.Millisecond}
			if a == sluice.TokenBucket || a == sluice.GCRA || a == sluice.LeakyBucket {
				pol.Burst = int64(b % 30)
			}
			return pol
		}
		versions := [2]sluice.Policy{version(l1, p1, b1), version(l2, p2, b2)}
		now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		var st sluice.State
		for i := 0; i+2 < len(ops) && i < 300; i += 3 {
			p := &versions[ops[i]&1]
			cost := int64(ops[i+1]) % (p.Capacity() + 1)
			now += int64(ops[i+2]) * 997 // up to about a quarter second
			next, res := sluice.Decide(p, st, now, cost)
			if res.Remaining < 0 || res.Remaining > p.Capacity() {
				t.Fatalf("op %d %+v cost %d: Remaining %d outside [0, %d]", i, *p, cost, res.Remaining, p.Capacity())
			}
			if cost == 0 {
				_, one := sluice.Decide(p, st, now, 1)
				if res.Allowed != one.Allowed || res.RetryAfter != one.RetryAfter || res.Allowed != (res.Remaining >= 1) || res.Delay != 0 {
					t.Fatalf("op %d %+v: peek %+v, want allowed as one unit is: %+v", i, *p, res, one)
				}
			}
			if !res.Allowed {
				wait := res.RetryAfter.Microseconds()
				if wait <= 0 {
					t.Fatalf("op %d %+v cost %d: denied with RetryAfter %v", i, *p, cost, res.RetryAfter)
				}
				if _, r := sluice.Decide(p, st, now+wait-1, cost); r.Allowed {
					t.Fatalf("op %d %+v cost %d: admitted 1µs before RetryAfter %v", i, *p, cost, res.RetryAfter)
				}
				if _, r := sluice.Decide(p, st, now+wait, cost); !r.Allowed {
					t.Fatalf("op %d %+v cost %d: denied at RetryAfter %v: %+v", i, *p, cost, res.RetryAfter, r)
				}
			}
			if reset := res.ResetAfter.Microseconds(); reset > 0 {
				if _, r := sluice.Decide(p, next, now+reset, 0); r.ResetAfter != 0 || r.Remaining != p.Capacity() {
					t.Fatalf("op %d %+v cost %d: at ResetAfter %v: %+v, want the initial state", i, *p, cost, res.ResetAfter, r)
				}
			}
			if (!res.Allowed || cost == 0) && (next.Time != st.Time || next.Count != st.Count || next.Prev != st.Prev || next.Log.Len() != st.Log.Len()) && res.ResetAfter != 0 {
				t.Fatalf("op %d %+v cost %d: %+v changed the state", i, *p, cost, res)
			}
			st = next
		}
	})
}
