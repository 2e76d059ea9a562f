package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// TestZeroLimiter: a Limiter not built by New — its zero value, or a nil
// pointer — answers every call with an error that says so, never a verdict
// on a zero policy and never a panic.
func TestZeroLimiter(t *testing.T) {
	ctx := context.Background()
	var zero sluice.Limiter
	var nilLimiter *sluice.Limiter
	for name, l := range map[string]*sluice.Limiter{"zero": &zero, "nil": nilLimiter} {
		for call, f := range map[string]func() (sluice.Result, error){
			"Allow":  func() (sluice.Result, error) { return l.Allow(ctx, "k") },
			"AllowN": func() (sluice.Result, error) { return l.AllowN(ctx, "k", 0) },
		} {
			res, err := f()
			if !errors.Is(err, sluice.ErrInvalidPolicy) || !strings.Contains(err.Error(), "sluice.New") {
				t.Errorf("%s Limiter, %s: %v, want ErrInvalidPolicy pointing at sluice.New", name, call, err)
			}
			if res.Allowed {
				t.Errorf("%s Limiter, %s: admitted", name, call)
			}
		}
		if _, err := sluice.AllowAll(ctx, sluice.Check{Limiter: l, Key: "k"}); !errors.Is(err, sluice.ErrInvalidPolicy) || !strings.Contains(err.Error(), "check 0") {
			t.Errorf("%s Limiter in AllowAll: %v, want ErrInvalidPolicy naming check 0", name, err)
		}
	}
}

// TestAllowAllNilLimiter: a Check without a Limiter, first or later, is an
// error naming its index, and nothing is consumed by the others.
func TestAllowAllNilLimiter(t *testing.T) {
	ctx := context.Background()
	lim, err := sluice.New(memory.New(), sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		checks []sluice.Check
		index  string
	}{
		{[]sluice.Check{{Key: "k"}, {Limiter: lim, Key: "k"}}, "check 0"},
		{[]sluice.Check{{Limiter: lim, Key: "k"}, {Key: "other"}}, "check 1"},
	} {
		_, err := sluice.AllowAll(ctx, c.checks...)
		if !errors.Is(err, sluice.ErrInvalidPolicy) || !strings.Contains(err.Error(), c.index) || !strings.Contains(err.Error(), "Limiter is nil") {
			t.Errorf("%+v: %v, want ErrInvalidPolicy saying %s has no Limiter", c.checks, err, c.index)
		}
	}
	if res, err := lim.Allow(ctx, "k"); err != nil || !res.Allowed {
		t.Errorf("after the refused checks: %+v, %v; want the one unit still there", res, err)
	}
}

// TestUnknownAlgorithmIsNeverDecided: a policy that skipped Validate and
// names no algorithm Sluice has is not decided by some other algorithm. The
// pure core panics saying what is wrong (it has no error to return, and only
// code that skips Validate reaches it), and the memory store does so before
// it takes a lock, so a caller that recovers leaves the store working.
func TestUnknownAlgorithmIsNeverDecided(t *testing.T) {
	bad := sluice.Policy{Name: "p", Algorithm: "gcra2", Limit: 10, Period: time.Second}
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			msg, _ := r.(string)
			if !strings.Contains(msg, `unknown algorithm "gcra2"`) || !strings.Contains(msg, "Validate") {
				t.Errorf("%s: recovered %v, want a panic naming the unknown algorithm and Validate", what, r)
			}
		}()
		f()
	}
	mustPanic("Decide", func() { sluice.Decide(&bad, sluice.State{}, 1, 1) })
	mustPanic("DecideInPlace", func() {
		var s sluice.State
		var res sluice.Result
		sluice.DecideInPlace(&bad, &s, 1, 1, &res)
	})
	ctx := context.Background()
	store := memory.New(memory.WithMaxKeys(1))
	req := sluice.Request{Policy: &bad, Key: "k", Cost: 1}
	mustPanic("memory Decide", func() { _, _ = store.Decide(ctx, req) })
	mustPanic("memory DecideAll", func() { _ = store.DecideAll(ctx, []sluice.Request{req}, make([]sluice.Result, 1)) })
	mustPanic("memory Reset", func() { _ = store.Reset(ctx, &bad, "k") })
	good := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	done := make(chan error, 1)
	go func() {
		_, err := store.Decide(ctx, sluice.Request{Policy: &good, Key: "k", Cost: 1})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the memory store stays locked after a recovered panic")
	}
	if store.Len() != 1 {
		t.Errorf("the memory store holds %d keys, want only the valid policy's", store.Len())
	}
}
