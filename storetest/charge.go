package storetest

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// chargeStep is a decision (AllowN) or a charge at Epoch+at, and the Result
// the contract requires.
type chargeStep struct {
	at     time.Duration
	charge bool
	cost   int64
	want   sluice.Result
}

func allowAt(at time.Duration, cost int64, want sluice.Result) chargeStep {
	return chargeStep{at, false, cost, want}
}

func chargeAt(at time.Duration, cost int64, want sluice.Result) chargeStep {
	return chargeStep{at, true, cost, want}
}

// owes is the Result of a charge that did not fit: nothing is left (remaining
// may be negative: what the key owes), and a request of one unit waits retry.
func owes(limit, remaining int64, retry, reset time.Duration) sluice.Result {
	return sluice.Result{Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

// bucketCharges: 10 per second with a bucket of 5 (T = 100ms). A charge of 8
// leaves 800ms of credit missing from a bucket of 500ms: 3 units owed, and
// one unit waits until 400ms have refilled.
func bucketCharges(leaky bool) []chargeStep {
	admitted := ok(10, 0, 500*ms) // 400ms still missing plus the unit's 100ms
	if leaky {
		admitted = delayed(admitted, 400*ms) // the queue's tail, the charge, leaves at 800ms
	}
	fit := ok(10, 2, 300*ms) // an admission of 1 would wait 200ms: a charge never does
	return []chargeStep{
		chargeAt(0, 8, owes(10, -3, 400*ms, 800*ms)),
		allowAt(399*ms+999*µs, 1, deny(10, 0, 1*µs, 400*ms+1*µs)),
		allowAt(400*ms, 1, admitted), // repaid at the bucket's rate
		chargeAt(500*ms, 3, owes(10, -2, 300*ms, 700*ms)),
		chargeAt(650*ms, 0, owes(10, -1, 150*ms, 550*ms)), // half a unit owed: −1
		allowAt(2*s, 2, delayed(ok(10, 3, 200*ms), 0)),
		chargeAt(2*s, 1, fit),
	}
}

// chargeVectors charge usage beyond the limit, worked by hand from the
// contract's "Charging usage": the key owes the excess (Remaining negative in
// the charge's Result, 0 in a decision's), and requests are denied until time
// repays it — at the buckets' rate, when the window ends, when the sliding
// window's weighted previous window or the log's entries have left.
var chargeVectors = []struct {
	name   string
	policy sluice.Policy
	steps  []chargeStep
}{
	{"fixed_window", sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}, []chargeStep{
		chargeAt(10*s, 15, owes(10, -5, 50*s, 50*s)), // 15 of 10: 5 owed until the window ends
		allowAt(20*s, 1, deny(10, 0, 40*s, 40*s)),
		allowAt(20*s, 0, deny(10, 0, 40*s, 40*s)),
		allowAt(60*s, 1, ok(10, 9, 60*s)),  // a new window owes nothing
		chargeAt(60*s, 4, ok(10, 5, 60*s)), // a charge that fits: AllowN's Result
		chargeAt(61*s, 5, ok(10, 0, 59*s)),
		allowAt(62*s, 0, deny(10, 0, 58*s, 58*s)), // nothing left
		chargeAt(62*s, 0, ok(10, 0, 58*s)),        // but nothing owed
		chargeAt(63*s, 1, owes(10, -1, 57*s, 57*s)),
		chargeAt(63*s, 0, owes(10, -1, 57*s, 57*s)),
	}},
	{"sliding_window", sluice.Policy{Name: "sw", Algorithm: sluice.SlidingWindow, Limit: 10, Period: s}, []chargeStep{
		// cur 15 of 10. In the next window prev 15 weighs 15·(P−e)/P: one
		// unit fits once 15·(P−e) ≤ 9·P, e ≥ 400ms, so at 1.4s.
		chargeAt(500*ms, 15, owes(10, -5, 900*ms, 1500*ms)),
		allowAt(1399*ms+999*µs, 1, deny(10, 0, 1*µs, 600*ms+1*µs)),
		allowAt(1400*ms, 1, ok(10, 0, 1600*ms)),
	}},
	{"sliding_log", sluice.Policy{Name: "sl", Algorithm: sluice.SlidingLog, Limit: 3, Period: s}, []chargeStep{
		allowAt(0, 1, ok(3, 2, 1*s)),
		// 5 logged of 3: one unit fits once the charge's entry left, at 1.2s
		chargeAt(200*ms, 4, owes(3, -2, 1*s, 1*s)),
		allowAt(1*s, 1, deny(3, 0, 200*ms, 200*ms)), // the entry at 0 left; 4 remain
		allowAt(1200*ms, 3, ok(3, 0, 1*s)),
	}},
	{"sliding_log_merges", sluice.Policy{Name: "sm", Algorithm: sluice.SlidingLog, Limit: 3, Period: s}, []chargeStep{
		allowAt(0, 1, ok(3, 2, 1*s)),
		allowAt(100*ms, 1, ok(3, 1, 1*s)),
		allowAt(200*ms, 1, ok(3, 0, 1*s)),
		// The log holds L entries: the charge joins the newest, which moves
		// to 300ms, (200ms, 1) becoming (300ms, 3).
		chargeAt(300*ms, 2, owes(3, -2, 1*s, 1*s)),
		allowAt(1200*ms, 1, deny(3, 0, 100*ms, 100*ms)), // (200ms, 1) would have left
		allowAt(1300*ms, 3, ok(3, 0, 1*s)),
	}},
	{"token_bucket", sluice.Policy{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 10, Period: s, Burst: 5}, bucketCharges(false)},
	{"gcra", sluice.Policy{Name: "gc", Algorithm: sluice.GCRA, Limit: 10, Period: s, Burst: 5}, bucketCharges(false)},
	{"leaky_bucket", sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 10, Period: s, Burst: 5}, bucketCharges(true)},
}

// charger returns the store as a sluice.Charger: the suite requires it.
func (e *env) charger() sluice.Charger {
	e.t.Helper()
	c, ok := e.h.Store.(sluice.Charger)
	if !ok {
		e.t.Fatalf("%T does not implement sluice.Charger", e.h.Store)
	}
	return c
}

func (e *env) charge(l *sluice.Limiter, key string, n int64) sluice.Result {
	e.t.Helper()
	res, err := l.Charge(e.ctx, key, n)
	if err != nil {
		e.t.Fatalf("Charge(%q, %d) at %v: %v", key, n, e.clock.Now().Sub(Epoch), err)
	}
	return res
}

func testChargeVectors(t *testing.T, open Opener) {
	for _, v := range chargeVectors {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, open)
			e.charger()
			l := e.limiter(v.policy)
			for i, st := range v.steps {
				e.at(st.at)
				var got sluice.Result
				if st.charge {
					got = e.charge(l, "k", st.cost)
				} else {
					got = e.allow(l, "k", st.cost)
				}
				if got != st.want {
					t.Fatalf("step %d (at %v, charge %v, cost %d):\n got %+v\nwant %+v", i, st.at, st.charge, st.cost, got, st.want)
				}
			}
		})
	}
}

// chargeCap is the most a key can owe under p, as the contract states it:
// 2^52 units in a fixed window or a sliding log, ⌊2^53/P⌋ units per sliding
// window (P in µs), 2^52µs of missing credit in a bucket.
func chargeCap(p sluice.Policy) (units int64, bucketMicros int64) {
	switch p.Algorithm {
	case sluice.FixedWindow, sluice.SlidingLog:
		return 1 << 52, 0
	case sluice.SlidingWindow:
		return (1 << 53) / us(p.Period), 0
	}
	return 0, 1 << 52
}

// testChargeBounds: a charge above the capacity is accepted, and however much
// is charged the key owes at most the cap, its answers stay exact, and a
// request is admitted again once the debt is repaid.
func testChargeBounds(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		p := policies(a)[0] // 5 per second
		l := e.limiter(p)
		T := newModel(p).T
		full := p.Capacity() * T
		// Three times the capacity: owed, not refused.
		want := owes(p.Limit, p.Limit-3*p.Capacity(), time.Second, time.Second)
		switch a {
		case sluice.SlidingWindow:
			// cur 15 of 5: the next window admits one once 15·(P−e) ≤ 4·P
			want.RetryAfter, want.ResetAfter = time.Second+733334*µs, 2*time.Second
		case sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket:
			want.RetryAfter, want.ResetAfter = micros(2*full+T), micros(3*full)
		}
		if got := e.charge(l, "three", 3*p.Capacity()); got != want {
			t.Fatalf("charge of 3×capacity:\n got %+v\nwant %+v", got, want)
		}

		units, bucket := chargeCap(p)
		for i, n := range []int64{math.MaxInt64, sluice.MaxCharge, 1} {
			got := e.charge(l, "max", n)
			want := owes(p.Limit, p.Limit-units, time.Second, time.Second)
			switch a {
			case sluice.SlidingWindow:
				want.ResetAfter = 2 * time.Second
				want.RetryAfter = time.Second + micros(us(p.Period)-(p.Limit-1)*us(p.Period)/units)
			case sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket:
				want = owes(p.Limit, floorDiv(full-bucket, T), micros(bucket+T-full), micros(bucket))
			}
			if got != want {
				t.Fatalf("charge %d of %d (cost %d) at the cap:\n got %+v\nwant %+v", i+1, 3, n, got, want)
			}
			if e.h.TTL != nil {
				if ttl, ok := e.h.TTL(p.Name, "max"); !ok || ttl < got.ResetAfter || ttl > got.ResetAfter+time.Millisecond {
					t.Fatalf("TTL %v (held %v) after %+v: want ResetAfter to ResetAfter+1ms", ttl, ok, got)
				}
			}
		}
		if r := e.allow(l, "max", 1); r.Allowed || r.Remaining != 0 {
			t.Fatalf("a request on a key at the cap: %+v, want denied, 0 remaining", r)
		}
		// The fresh key next to it is untouched.
		if r := e.allow(l, "other", 0); !r.Allowed || r.Remaining != p.Capacity() {
			t.Fatalf("another key: %+v", r)
		}
	})
}

// testChargeExpiry: a key in debt is kept until the debt is repaid — its
// state's lifetime is the charge's ResetAfter, which covers the repayment —
// and is initial once it is.
func testChargeExpiry(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		p := policies(a)[0]
		l := e.limiter(p)
		e.at(123 * time.Millisecond)
		res := e.charge(l, "k", 3*p.Capacity())
		if res.Allowed || res.Remaining >= 0 || res.RetryAfter <= 0 || res.ResetAfter < res.RetryAfter {
			t.Fatalf("charge of 3×capacity: %+v, want owed, with a RetryAfter within ResetAfter", res)
		}
		if e.h.TTL != nil {
			ttl, ok := e.h.TTL(p.Name, "k")
			if !ok || ttl < res.ResetAfter || ttl > res.ResetAfter+time.Millisecond {
				t.Fatalf("TTL %v (held %v) after %+v: want ResetAfter to ResetAfter+1ms", ttl, ok, res)
			}
		}
		start := e.clock.Now()
		e.clock.Set(start.Add(res.RetryAfter - time.Microsecond))
		if r := e.allow(l, "k", 1); r.Allowed {
			t.Fatalf("admitted 1µs before the charge's RetryAfter %v: %+v", res.RetryAfter, r)
		}
		e.clock.Set(start.Add(res.ResetAfter - time.Microsecond))
		if r := e.allow(l, "k", 0); r.ResetAfter != time.Microsecond {
			t.Fatalf("1µs before ResetAfter: %+v, want ResetAfter 1µs", r)
		}
		e.clock.Set(start.Add(res.ResetAfter))
		if r := e.allow(l, "k", 0); !r.Allowed || r.ResetAfter != 0 || r.Remaining != p.Capacity() {
			t.Fatalf("at ResetAfter: %+v, want the initial state", r)
		}
	})
}

// testChargeAll: ChargeAll charges each usage as Charge would, in order — a
// key named twice owes both — and denies nothing.
func testChargeAll(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		user := e.limiter(sluice.Policy{Name: "user", Algorithm: a, Limit: 5, Period: time.Second})
		global := e.limiter(sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 8, Period: time.Second})
		e.at(100 * time.Millisecond)
		got, err := sluice.ChargeAll(e.ctx,
			sluice.Usage{Limiter: user, Key: "alice", Cost: 4},
			sluice.Usage{Limiter: global, Key: "all", Cost: 9},
			sluice.Usage{Limiter: user, Key: "alice", Cost: 3})
		if err != nil {
			t.Fatal(err)
		}
		want := []sluice.Result{e.charge(user, "twin", 4), e.charge(global, "twin", 9), e.charge(user, "twin", 3)}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("usage %d: got %+v, want %+v (Charge one at a time)", i, got[i], want[i])
			}
		}
		if !got[0].Allowed || got[1].Allowed || got[2].Allowed || got[2].Remaining >= 0 {
			t.Fatalf("ChargeAll: %+v, want the first to fit and the others owed", got)
		}
		if _, err := sluice.ChargeAll(e.ctx, sluice.Usage{Limiter: user, Key: "", Cost: 1}); !errors.Is(err, sluice.ErrInvalidKey) {
			t.Fatalf("ChargeAll of an empty key: %v, want ErrInvalidKey", err)
		}
		if _, err := user.Charge(e.ctx, "k", -1); !errors.Is(err, sluice.ErrInvalidCost) {
			t.Fatalf("Charge of -1: %v, want ErrInvalidCost", err)
		}
	})
}

func micros(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// testPeekInSet: in an all-or-nothing set a peek takes part like any check:
// a key with nothing left denies the set, with one unit's wait, and nothing
// is consumed anywhere; once a unit is back the set is admitted.
func testPeekInSet(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		user := e.limiter(sluice.Policy{Name: "user", Algorithm: a, Limit: 2, Period: time.Second})
		global := e.limiter(sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour})
		e.allow(user, "alice", 2)
		one := e.allow(user, "alice", 1) // denied: the wait for one unit
		set := func() []sluice.Result {
			t.Helper()
			res, err := sluice.AllowAll(e.ctx,
				sluice.Check{Limiter: user, Key: "alice", Peek: true},
				sluice.Check{Limiter: global, Key: "all", Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		r := set()
		if r[0].Allowed || r[1].Allowed || r[0].RetryAfter != one.RetryAfter || r[1].RetryAfter != one.RetryAfter {
			t.Fatalf("a set peeking at a used-up key: %+v, want both denied after %v", r, one.RetryAfter)
		}
		if g := e.allow(global, "all", 0); g.Remaining != 10 {
			t.Fatalf("the denied set consumed from the global limit: %+v", g)
		}
		e.clock.Advance(one.RetryAfter)
		if r := set(); !r[0].Allowed || !r[1].Allowed || r[0].Remaining < 1 || r[1].Remaining != 9 {
			t.Fatalf("the set once a unit is back: %+v, want both allowed, the peek consuming nothing", r)
		}
	})
}
