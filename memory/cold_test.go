package memory

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/storetest"
)

// The compact part never lets a key pass what its own state would deny, even
// when keys share slots (here up to two keys per hash, so that they cannot be
// told apart), a table of one bucket overflows into its floor at every turn,
// and the policy's numbers change back and forth. Each key's true state is what its admissions alone make it; a
// decision the store admits must be one that state admits too.
func TestCompactNeverUndercounts(t *testing.T) {
	policies := func(a sluice.Algorithm) []sluice.Policy {
		return []sluice.Policy{
			{Name: "p", Algorithm: a, Limit: 5, Period: 100 * time.Millisecond},
			{Name: "p", Algorithm: a, Limit: 3, Period: 250 * time.Millisecond}, // the same state under other numbers
		}
	}
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			for seed := range uint64(20) {
				testCompactNeverUndercounts(t, policies(a), seed)
			}
		})
	}
}

func testCompactNeverUndercounts(t *testing.T, policies []sluice.Policy, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := New(WithMaxKeys(1))
	s.coldBuckets = 1
	sh := &s.shards[0]
	alg := algorithmIndex(policies[0].Algorithm)
	u := s.budgets.usage("p")
	const keys = 40
	hashOf := func(k int) uint64 { return uint64(k%25) << 16 } // 25 fingerprints for 40 keys, one bucket of 16
	truth := make([]sluice.State, keys)
	now := storetest.Epoch.UnixMicro()
	for step := range 3000 {
		now += rng.Int64N(5_000)
		p := &policies[rng.IntN(len(policies))]
		k := rng.IntN(keys)
		cost := rng.Int64N(p.Capacity() + 1)
		var st sluice.State
		var res sluice.Result
		r, _ := s.coldRead(sh, hashOf(k), u, p, alg, now, &st)
		sluice.DecideInPlace(p, &st, now, cost, &res)
		if res.Allowed && cost > 0 {
			if _, want := sluice.Decide(p, truth[k], now, cost); !want.Allowed {
				t.Fatalf("seed %d step %d: key %d admitted %d under %+v, which its own state %+v denies (%+v)",
					seed, step, k, cost, *p, truth[k], want)
			}
			truth[k], _ = sluice.Decide(p, truth[k], now, cost)
		} else {
			// A denial consumes nothing; like the exact part, the key's
			// state is dropped once back to initial under the policy at hand.
			truth[k], _ = sluice.Decide(p, truth[k], now, 0)
		}
		switch {
		case res.ResetAfter == 0:
			if r.match >= 0 {
				sh.cold.clearExpired(&s.colds, &r, now)
			}
		case res.Allowed && cost > 0:
			if !s.spill(sh, hashOf(k), u, alg, p, &st, now+res.ResetAfter.Microseconds(), now) {
				t.Fatal("no compact part")
			}
		}
	}
	if st := s.Stats(); st.Folded == 0 {
		t.Fatalf("seed %d: nothing folded (%+v): the floor went untested", seed, st)
	}
}

// A state the compact part holds exactly decodes to one that decides as the
// original does, at every later instant and cost, under the policy that made
// it; merging two states gives one that admits nothing either denies.
func TestCompactStates(t *testing.T) {
	for _, a := range sluice.Algorithms {
		p := &sluice.Policy{Name: "p", Algorithm: a, Limit: 6, Period: time.Second}
		alg := algorithmIndex(a)
		rng := rand.New(rand.NewPCG(uint64(alg), 2))
		for trial := range 500 {
			states := [2]sluice.State{}
			now := int64(1e12)
			for i := range states {
				t0 := now + rng.Int64N(3e6)
				for range rng.IntN(4) + 1 {
					t0 += rng.Int64N(400_000)
					states[i], _ = sluice.Decide(p, states[i], t0, rng.Int64N(3))
				}
				now = max(now, t0)
			}
			at := func(i int) string { return fmt.Sprintf("trial %d, %s state %+v", trial, a, states[i]) }
			for i := range states {
				c, exact, ok := encodeCold(alg, &states[i])
				if !ok {
					t.Fatalf("%s: no compact form", at(i))
				}
				var back sluice.State
				c.decode(p, alg, now, &back)
				assertNoMore(t, p, now, &back, &states[i], exact, at(i))
			}
			merged := states[0]
			merge(p, alg, now, &merged, &states[1])
			for i := range states {
				assertNoMore(t, p, now, &merged, &states[i], false, at(i)+" merged")
			}
		}
	}
}

// assertNoMore fails unless got admits nothing that want denies from now on
// (and, with same, decides exactly as want does).
func assertNoMore(t *testing.T, p *sluice.Policy, now int64, got, want *sluice.State, same bool, what string) {
	t.Helper()
	for dt := int64(0); dt < 3*p.Period.Microseconds(); dt += 37_000 {
		for cost := range p.Capacity() + 1 {
			_, g := sluice.Decide(p, *got, now+dt, cost)
			_, w := sluice.Decide(p, *want, now+dt, cost)
			if g.Allowed && !w.Allowed || same && g != w {
				t.Fatalf("%s: at +%dµs cost %d the compact state gives %+v, the state %+v", what, dt, cost, g, w)
			}
		}
	}
}

// entryHash gives back, from an entry, the hash its key was stored under (a
// demoted key must land in the buckets its next lookup reads), for short keys
// held inside the entry and long ones held apart.
func TestEntryHashIsTheKeysHash(t *testing.T) {
	s := New(WithClock(storetest.NewClock(storetest.Epoch)))
	for _, a := range sluice.Algorithms {
		p := &sluice.Policy{Name: "p-" + string(a), Algorithm: a, Limit: 10, Period: time.Hour}
		for i := range 200 {
			key := fmt.Sprint("k", i)
			if i%2 == 1 {
				key = fmt.Sprintf("a-key-longer-than-fifteen-bytes-%d", i)
			}
			var res sluice.Result
			s.apply(p, key, 1, true, nil, &res)
			var id entryKey
			id.set(p, key)
			h := s.hash(&id)
			sh := &s.shards[h&s.mask]
			pos, ok := sh.find(h, &id)
			if !ok {
				t.Fatalf("%s/%s not stored", p.Name, key)
			}
			if got := s.entryHash(sh.at(pos)); got != h {
				t.Fatalf("%s/%s: entryHash %x, stored under %x", p.Name, key, got, h)
			}
		}
	}
}
