package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testFixedWindowBoundary shows the fixed window's known weakness, and that it
// goes no further: 2L pass within 2µs across a boundary, never 2L+1.
func testFixedWindowBoundary(t *testing.T, open Opener) {
	e := newEnv(t, open)
	l := e.limiter(sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	admitted := 0
	for _, at := range []time.Duration{time.Minute - time.Microsecond, time.Minute} {
		e.at(at)
		for range 11 {
			if e.allow(l, "k", 1).Allowed {
				admitted++
			}
		}
	}
	if admitted != 20 {
		t.Fatalf("admitted %d around the boundary, want exactly 2L = 20", admitted)
	}
}

// testPeek: cost 0 reports the state and changes nothing — a key that is
// peeked at between requests answers exactly like one that is not — and is
// allowed exactly when a request of one unit would be: when something is
// left. Denied, its RetryAfter is exact: still denied 1µs before it, allowed
// at it.
func testPeek(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		p := policies(a)[0]
		e := newEnv(t, open)
		l := e.limiter(p)
		denied := 0
		for i := 0; i < 40; i++ {
			e.clock.Advance(time.Duration(i%7) * p.Period / 13)
			cost := int64(i%3 + 1)
			peek := e.allow(l, "peeked", 0)
			if peek.Allowed != (peek.Remaining >= 1) || peek.Delay != 0 ||
				peek.Allowed && peek.RetryAfter != 0 || !peek.Allowed && peek.RetryAfter <= 0 {
				t.Fatalf("step %d: peek %+v: want allowed exactly when something is left, a RetryAfter only when denied, no Delay", i, peek)
			}
			if again := e.allow(l, "peeked", 0); again != peek {
				t.Fatalf("step %d: second peek %+v differs from first %+v", i, again, peek)
			}
			if !peek.Allowed {
				denied++
				start := e.clock.Now()
				e.clock.Set(start.Add(peek.RetryAfter - time.Microsecond))
				if r := e.allow(l, "peeked", 0); r.Allowed {
					t.Fatalf("step %d: peek allowed 1µs before its RetryAfter %v: %+v", i, peek.RetryAfter, r)
				}
				e.clock.Set(start.Add(peek.RetryAfter))
				if r := e.allow(l, "peeked", 0); !r.Allowed || r.Remaining < 1 {
					t.Fatalf("step %d: peek denied at its RetryAfter %v: %+v", i, peek.RetryAfter, r)
				}
			}
			plain, peeked := e.allow(l, "plain", cost), e.allow(l, "peeked", cost)
			if plain != peeked {
				t.Fatalf("step %d: peeks changed the answer: %+v vs %+v", i, peeked, plain)
			}
		}
		if denied == 0 {
			t.Fatalf("no peek found the key used up: the trace tests nothing")
		}
	})
}

// testDeniedConsumesNothing: a denial leaves the state as it was, so a smaller
// request that fits is still admitted.
func testDeniedConsumesNothing(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		p := sluice.Policy{Name: "d", Algorithm: a, Limit: 5, Period: time.Second}
		e := newEnv(t, open)
		l := e.limiter(p)
		if r := e.allow(l, "k", 4); !r.Allowed {
			t.Fatalf("first 4 units denied: %+v", r)
		}
		before := e.allow(l, "k", 0)
		for range 3 {
			if r := e.allow(l, "k", 2); r.Allowed {
				t.Fatalf("2 units admitted with 1 left: %+v", r)
			}
		}
		if after := e.allow(l, "k", 0); after != before {
			t.Fatalf("denials changed the state: before %+v after %+v", before, after)
		}
		if r := e.allow(l, "k", 1); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("the last unit: %+v, want allowed with 0 remaining", r)
		}
	})
}

// testAllOrNothing: a per-user limit of every algorithm with a global limit.
func testAllOrNothing(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		user := e.limiter(sluice.Policy{Name: "user", Algorithm: a, Limit: 5, Period: time.Second})
		global := e.limiter(sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Second})
		e.at(100 * time.Millisecond)
		batch := func(cost int64) []sluice.Result {
			t.Helper()
			res, err := sluice.AllowAll(e.ctx,
				sluice.Check{Limiter: user, Key: "alice", Cost: cost, Peek: cost == 0},
				sluice.Check{Limiter: global, Key: "all", Cost: cost, Peek: cost == 0})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		for i := range 3 {
			if r := batch(1); !r[0].Allowed || !r[1].Allowed {
				t.Fatalf("batch %d: %+v, want both allowed", i, r)
			}
		}
		userBefore := e.allow(user, "alice", 0)
		r := batch(1) // the global limit is exhausted
		if r[0].Allowed || r[1].Allowed {
			t.Fatalf("batch over the global limit: %+v, want both denied", r)
		}
		if r[0].RetryAfter != 900*time.Millisecond || r[1].RetryAfter != r[0].RetryAfter {
			t.Fatalf("RetryAfter %v/%v, want the global window's 900ms on both", r[0].RetryAfter, r[1].RetryAfter)
		}
		if r[0].Remaining != userBefore.Remaining || r[0].ResetAfter != userBefore.ResetAfter {
			t.Fatalf("denied batch reports user %+v, want its unchanged state %+v", r[0], userBefore)
		}
		if after := e.allow(user, "alice", 0); after != userBefore {
			t.Fatalf("denied batch consumed from the user limit: before %+v after %+v", userBefore, after)
		}
		// Whatever shape the user's state is in (a log's ring wrapping, windows
		// rolling), a batch denied by the other limit leaves it untouched.
		closed := e.limiter(sluice.Policy{Name: "closed", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour})
		e.allow(closed, "all", 1)
		small := e.limiter(sluice.Policy{Name: "small", Algorithm: a, Limit: 4, Period: time.Second})
		// "twin" gets the same requests as "bob" but never the batches (a peek
		// on bob before the batch could tidy its state and hide damage).
		for i := range 24 {
			for range 4 {
				e.allow(small, "bob", 1)
				e.allow(small, "twin", 1)
			}
			e.clock.Advance(time.Duration(i%4+2) * time.Second / 4)
			res, err := sluice.AllowAll(e.ctx,
				sluice.Check{Limiter: small, Key: "bob", Cost: 1},
				sluice.Check{Limiter: closed, Key: "all", Cost: 1})
			if err != nil || res[0].Allowed {
				t.Fatalf("round %d: batch against an exhausted limit: %+v, %v", i, res, err)
			}
			if bob, twin := e.allow(small, "bob", 0), e.allow(small, "twin", 0); bob != twin {
				t.Fatalf("round %d: a denied batch changed the state: %+v, untouched twin %+v", i, bob, twin)
			}
		}

		// Both deny: the batch waits for the later of the two.
		e.at(time.Second)
		for range 2 {
			batch(1)
		}
		r = batch(3) // global: 2+3 > 3; the user limit may deny too
		wantRetry := r[0].RetryAfter
		if r[0].Allowed || r[1].Allowed || r[1].RetryAfter != wantRetry {
			t.Fatalf("batch %+v: want both denied with one RetryAfter", r)
		}
		start := e.clock.Now()
		if wantRetry > time.Microsecond {
			e.clock.Set(start.Add(wantRetry - time.Microsecond))
			if r := batch(3); r[0].Allowed {
				t.Fatalf("batch admitted 1µs before its RetryAfter %v", wantRetry)
			}
		}
		e.clock.Set(start.Add(wantRetry))
		if r := batch(3); !r[0].Allowed || !r[1].Allowed {
			t.Fatalf("batch denied at its RetryAfter %v: %+v", wantRetry, r)
		}
	})
}

// testCapacity: cost = capacity passes on a fresh key; more is an error, not a wait.
func testCapacity(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		for _, p := range policies(a) {
			e := newEnv(t, open)
			l := e.limiter(p)
			if r := e.allow(l, "k", p.Capacity()); !r.Allowed || r.Remaining != 0 {
				t.Fatalf("%s: cost = capacity %d on a fresh key: %+v", p.Name, p.Capacity(), r)
			}
			_, err := l.AllowN(e.ctx, "k2", p.Capacity()+1)
			if !errors.Is(err, sluice.ErrExceedsCapacity) {
				t.Fatalf("%s: cost capacity+1: err %v, want ErrExceedsCapacity", p.Name, err)
			}
			_, err = sluice.AllowAll(e.ctx, sluice.Check{Limiter: l, Key: "k3", Cost: p.Capacity() + 1})
			if !errors.Is(err, sluice.ErrExceedsCapacity) {
				t.Fatalf("%s: AllowAll cost capacity+1: err %v, want ErrExceedsCapacity", p.Name, err)
			}
			if r := e.allow(l, "k2", 0); r.Remaining != p.Capacity() {
				t.Fatalf("%s: the refused request consumed: %+v", p.Name, r)
			}
		}
	})
}

// testInputErrors: bad input is a clear error naming what is wrong; odd but
// valid keys are kept apart.
func testInputErrors(t *testing.T, open Opener) {
	e := newEnv(t, open)
	l := e.limiter(sluice.Policy{Name: "in", Algorithm: sluice.GCRA, Limit: 2, Period: time.Second})
	for _, c := range []struct {
		key  string
		cost int64
		want error
	}{
		{"k", -1, sluice.ErrInvalidCost},
		{"", 1, sluice.ErrInvalidKey},
		{strings.Repeat("x", sluice.MaxKeyLen+1), 1, sluice.ErrInvalidKey},
	} {
		if _, err := l.AllowN(e.ctx, c.key, c.cost); !errors.Is(err, c.want) {
			t.Errorf("AllowN(%.20q…, %d): err %v, want %v", c.key, c.cost, err, c.want)
		}
	}
	// Keys with hash-tag braces, separators, NUL and non-ASCII bytes are
	// ordinary, distinct keys.
	keys := []string{"a{b}", "a{c}", "{}", "}{", "a:b", "a%7Bb", "a\x00b", "ключ", strings.Repeat("y", sluice.MaxKeyLen)}
	for _, k := range keys {
		if r := e.allow(l, k, 2); !r.Allowed {
			t.Fatalf("key %q: first 2 units denied: %+v (keys collide?)", k, r)
		}
	}
	for _, k := range keys {
		if r := e.allow(l, k, 1); r.Allowed {
			t.Fatalf("key %q: third unit admitted: %+v", k, r)
		}
	}
	for _, p := range []struct {
		p     sluice.Policy
		field string
	}{
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}, "Name"},
		{sluice.Policy{Name: "a b", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}, "Name"},
		{sluice.Policy{Name: "x", Algorithm: "lottery", Limit: 1, Period: time.Second}, "Algorithm"},
		{sluice.Policy{Name: "x", Algorithm: sluice.GCRA, Limit: 0, Period: time.Second}, "Limit"},
		{sluice.Policy{Name: "x", Algorithm: sluice.GCRA, Limit: 1, Period: 0}, "Period"},
		{sluice.Policy{Name: "x", Algorithm: sluice.GCRA, Limit: 1, Period: time.Millisecond + 500*time.Nanosecond}, "Period"},
		{sluice.Policy{Name: "x", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second, Burst: 2}, "Burst"},
		{sluice.Policy{Name: "x", Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Second, Burst: -1}, "Burst"},
		{sluice.Policy{Name: "x", Algorithm: sluice.SlidingWindow, Limit: 1 << 30, Period: 24 * time.Hour}, "Limit"},
	} {
		_, err := sluice.New(e.h.Store, p.p)
		var pe *sluice.PolicyError
		if !errors.Is(err, sluice.ErrInvalidPolicy) || !errors.As(err, &pe) || pe.Field != p.field {
			t.Errorf("sluice.New(%+v): err %v, want a PolicyError naming %s", p.p, err, p.field)
		}
	}
}

// testExpiry: state carries a lifetime of ResetAfter (rounded up to at most a
// millisecond), and a key whose state is initial holds nothing.
func testExpiry(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		p := policies(a)[0]
		l := e.limiter(p)
		if r := e.allow(l, "fresh", 0); r.ResetAfter != 0 || r.Remaining != p.Capacity() {
			t.Fatalf("peek on a fresh key: %+v, want full and ResetAfter 0", r)
		}
		if e.h.TTL != nil {
			if ttl, ok := e.h.TTL(p.Name, "fresh"); ok {
				t.Fatalf("a peek on a fresh key stored state (TTL %v)", ttl)
			}
		}
		e.at(123 * time.Millisecond)
		var last sluice.Result
		for range 3 {
			last = e.allow(l, "k", 1)
			if e.h.TTL == nil {
				continue
			}
			ttl, ok := e.h.TTL(p.Name, "k")
			if !ok || ttl < last.ResetAfter || ttl > last.ResetAfter+time.Millisecond {
				t.Fatalf("TTL %v (held %v) after %+v: want ResetAfter to ResetAfter+1ms", ttl, ok, last)
			}
		}
		e.clock.Advance(last.ResetAfter - time.Microsecond)
		if r := e.allow(l, "k", 0); r.ResetAfter != time.Microsecond {
			t.Fatalf("1µs before ResetAfter: %+v, want ResetAfter 1µs", r)
		}
		e.clock.Advance(time.Microsecond)
		if r := e.allow(l, "k", 0); r.ResetAfter != 0 || r.Remaining != p.Capacity() {
			t.Fatalf("at ResetAfter: %+v, want the initial state", r)
		}
	})
}

// testConcurrent: with time frozen, concurrent callers get exactly the capacity
// between them — no lost update, no double spend.
func testConcurrent(t *testing.T, open Opener) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		e := newEnv(t, open)
		user := e.limiter(sluice.Policy{Name: "cu", Algorithm: a, Limit: 30, Period: time.Hour})
		global := e.limiter(sluice.Policy{Name: "cg", Algorithm: a, Limit: 100, Period: time.Hour})
		const workers, each = 8, 40
		var mu sync.Mutex
		single, batched := 0, map[int]int{}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					r, err := global.Allow(e.ctx, "single")
					if err != nil {
						t.Error(err)
						return
					}
					rs, err := sluice.AllowAll(e.ctx,
						sluice.Check{Limiter: user, Key: string(rune('a' + w%4)), Cost: 1},
						sluice.Check{Limiter: global, Key: "shared", Cost: 1})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if r.Allowed {
						single++
					}
					if rs[0].Allowed {
						batched[w%4]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if single != 100 {
			t.Errorf("%d callers admitted %d on one key with capacity 100", workers, single)
		}
		total := 0
		for u, n := range batched {
			total += n
			if n > 30 {
				t.Errorf("user %d admitted %d > its limit 30", u, n)
			}
		}
		if total != 100 {
			t.Errorf("batches admitted %d in all, want exactly the global 100", total)
		}
	})
}
