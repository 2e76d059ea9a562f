package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

func TestParseAlgorithm(t *testing.T) {
	for _, a := range sluice.Algorithms {
		got, err := sluice.ParseAlgorithm(string(a))
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", a, got, err)
		}
	}
	for _, bad := range []string{"", "GCRA", "token-bucket", "lottery"} {
		if _, err := sluice.ParseAlgorithm(bad); err == nil {
			t.Errorf("ParseAlgorithm(%q) accepted", bad)
		}
	}
}

func TestValidateAcceptsDefaults(t *testing.T) {
	for _, a := range sluice.Algorithms {
		p := sluice.Policy{Name: "api/v1:read-all_x.y", Algorithm: a, Limit: 100, Period: time.Minute}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	p := sluice.Policy{Name: "b", Algorithm: sluice.GCRA, Limit: 1_000_000, Period: 24 * time.Hour, Burst: 5000}
	if err := p.Validate(); err != nil {
		t.Errorf("a million a day with gcra: %v", err)
	}
}

// Time that runs backwards inside a decision is treated as no time passing: a
// step back never refills a bucket or reopens a window.
func TestTimeRunningBackwardsRefillsNothing(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC).UnixMicro()
	for _, a := range sluice.Algorithms {
		p := sluice.Policy{Name: "p", Algorithm: a, Limit: 5, Period: time.Minute}
		var st sluice.State
		var res sluice.Result
		for range 5 {
			st, res = sluice.Decide(&p, st, now, 1)
		}
		for _, back := range []time.Duration{time.Microsecond, time.Second, time.Hour} {
			then := now - back.Microseconds()
			if _, res = sluice.Decide(&p, st, then, 1); res.Allowed || res.Remaining != 0 || res.RetryAfter <= 0 {
				t.Errorf("%s: %v back in time: %+v, want still exhausted", a, back, res)
			}
			if _, peek := sluice.Decide(&p, st, then, 0); peek.Allowed || peek.Remaining != 0 || peek.RetryAfter != res.RetryAfter {
				t.Errorf("%s: peek %v back in time: %+v, want denied as one unit is: %+v", a, back, peek, res)
			}
		}
	}
}

func TestSystemClockIsAnchoredAndMonotonic(t *testing.T) {
	c := sluice.SystemClock()
	prev := c.Now()
	if d := time.Since(prev); d < 0 || d > time.Second {
		t.Fatalf("SystemClock is %v away from time.Now", d)
	}
	for range 1000 {
		now := c.Now()
		if now.UnixMicro() < prev.UnixMicro() {
			t.Fatalf("SystemClock went backwards: %v after %v", now, prev)
		}
		prev = now
	}
}

func TestLimiterErrors(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}
	if _, err := sluice.New(nil, p); err == nil {
		t.Error("New(nil store) accepted")
	}
	a, _ := sluice.New(memory.New(), p)
	b, _ := sluice.New(memory.New(), p)
	if _, err := sluice.AllowAll(ctx, sluice.Check{Limiter: a, Key: "k", Cost: 1}, sluice.Check{Limiter: b, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrStoreMismatch) {
		t.Errorf("limiters on two stores: %v, want ErrStoreMismatch", err)
	}
	if _, err := sluice.AllowAll(ctx, sluice.Check{Limiter: a, Key: "k", Cost: 1}, sluice.Check{Limiter: a, Key: "k", Cost: 2}); !errors.Is(err, sluice.ErrDuplicateCheck) {
		t.Errorf("the same key twice: %v, want ErrDuplicateCheck", err)
	}
	if rs, err := sluice.AllowAll(ctx); rs != nil || err != nil {
		t.Errorf("AllowAll() = %v, %v; want nothing", rs, err)
	}
	var pe *sluice.PolicyError
	_, err := sluice.New(memory.New(), sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Period: time.Second})
	if !errors.As(err, &pe) || pe.Field != "Limit" || pe.Policy != "p" {
		t.Errorf("Limit 0: %v, want a PolicyError naming Limit of p", err)
	}
}

func TestEmissionIntervalRoundsUp(t *testing.T) {
	for _, c := range []struct {
		limit  int64
		period time.Duration
		want   time.Duration
	}{
		{10, time.Second, 100 * time.Millisecond},
		{3, time.Second, 333334 * time.Microsecond}, // never faster than 3/s
		{1_000_000, time.Second, time.Microsecond},
		{600_000, time.Second, 2 * time.Microsecond},
	} {
		p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: c.limit, Period: c.period}
		if got := p.EmissionInterval(); got != c.want {
			t.Errorf("%d per %v: T = %v, want %v", c.limit, c.period, got, c.want)
		}
	}
}

// TestCheckZeroCostCountsOne: a Check without Cost costs one unit, as a call
// to Allow does; only an explicit Peek looks without consuming.
func TestCheckZeroCostCountsOne(t *testing.T) {
	ctx := context.Background()
	clock := &fixedClock{t: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	perUser, err := sluice.New(memory.New(memory.WithClock(clock)),
		sluice.Policy{Name: "per-user", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	peek := func() sluice.Result {
		t.Helper()
		res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: perUser, Key: "carol", Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := peek(); !r.Allowed || r.Remaining != 3 {
		t.Fatalf("peek before: %+v, want allowed with 3 remaining", r)
	}
	var allowed int
	for i := range 5 {
		res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: perUser, Key: "carol"})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed {
			allowed++
		}
		if want := int64(max(0, 2-i)); res[0].Remaining != want {
			t.Errorf("check %d: remaining %d, want %d", i+1, res[0].Remaining, want)
		}
	}
	if allowed != 3 {
		t.Errorf("5 checks without Cost on a limit of 3: %d allowed, want 3", allowed)
	}
	if r := peek(); r.Remaining != 0 {
		t.Errorf("peek after: remaining %d, want 0", r.Remaining)
	}
	_, err = sluice.AllowAll(ctx, sluice.Check{Limiter: perUser, Key: "carol", Peek: true, Cost: 2})
	if !errors.Is(err, sluice.ErrInvalidCost) {
		t.Errorf("a peek with a cost: err %v, want ErrInvalidCost", err)
	}
}

// fixedClock stands still: nothing here may depend on time passing.
type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// A bucket whose policy shrank holds more missing credit than its new B·T. That
// is not a clock that ran backwards: the wait is the real one. A clock that does
// run backwards afterwards still refills nothing.
func TestShrunkBucketIsNotABackwardsClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC).UnixMicro()
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket} {
		wide := sluice.Policy{Name: "p", Algorithm: a, Limit: 10, Period: time.Second, Burst: 10}
		narrow := wide
		narrow.Burst = 2
		st, _ := sluice.Decide(&wide, sluice.State{}, now, 10)
		for _, at := range []int64{now, now - 1, now - time.Hour.Microseconds()} {
			_, res := sluice.Decide(&narrow, st, at, 1)
			want := sluice.Result{Limit: 10, RetryAfter: 900 * time.Millisecond, ResetAfter: time.Second}
			if res != want {
				t.Errorf("%s: burst 10 used, then burst 2, %dµs after: %+v, want %+v", a, at-now, res, want)
			}
			if _, peek := sluice.Decide(&narrow, st, at, 0); peek != want {
				t.Errorf("%s: peek %dµs after: %+v, want denied as one unit is: %+v", a, at-now, peek, want)
			}
		}
	}
}
