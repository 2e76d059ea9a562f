package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// RunSlots runs the in-flight slot cases alone (Run runs them too), for a
// store whose rate decisions are not exact and so cannot pass Run, such as
// package lease's. Its Store must implement sluice.SlotStore
// (docs/semantics.md, "Concurrency").
func RunSlots(t *testing.T, open Opener) {
	t.Run("Vectors", func(t *testing.T) { testSlotVectors(t, open) })
	t.Run("Release", func(t *testing.T) { testSlotRelease(t, open) })
	t.Run("Lease", func(t *testing.T) { testSlotLease(t, open) })
	t.Run("Change", func(t *testing.T) { testSlotChange(t, open) })
	t.Run("Reference", func(t *testing.T) { testSlotReference(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testSlotConcurrent(t, open) })
	t.Run("AcquireAll", func(t *testing.T) { testSlotAcquireAll(t, open) })
	t.Run("Reset", func(t *testing.T) { testSlotReset(t, open) })
}

// slotPolicy is a concurrency policy of limit slots and a one-second lease.
func slotPolicy(name string, limit int64) sluice.Policy {
	return sluice.Policy{Name: name, Algorithm: sluice.Concurrency, Limit: limit, Period: time.Second}
}

// slotEnv opens a store that must hold slots.
func slotEnv(t *testing.T, open Opener) *env {
	t.Helper()
	e := newEnv(t, open)
	if _, ok := e.h.Store.(sluice.SlotStore); !ok {
		t.Fatalf("%T does not implement sluice.SlotStore", e.h.Store)
	}
	return e
}

func (e *env) acquire(l *sluice.Limiter, key string) (sluice.Result, *sluice.Slot) {
	e.t.Helper()
	res, slot, err := l.Acquire(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Acquire(%q) at %v: %v", key, e.clock.Now().Sub(Epoch), err)
	}
	if res.Allowed != (slot != nil) {
		e.t.Fatalf("Acquire(%q): %+v with slot %v", key, res, slot)
	}
	return res, slot
}

func (e *env) held(l *sluice.Limiter, key string) sluice.Result {
	e.t.Helper()
	res, err := l.Held(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Held(%q): %v", key, err)
	}
	return res
}

func (e *env) release(l *sluice.Limiter, key, token string) bool {
	e.t.Helper()
	ok, err := l.Release(e.ctx, key, token)
	if err != nil {
		e.t.Fatalf("Release(%q, %q): %v", key, token, err)
	}
	return ok
}

// wantSlot checks a Result of a concurrency policy against the exact answer.
func (e *env) wantSlot(what string, got sluice.Result, allowed bool, remaining int64, retry, reset time.Duration) {
	e.t.Helper()
	want := sluice.Result{Allowed: allowed, Limit: got.Limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
	if got != want {
		e.t.Fatalf("%s at %v: %+v, want %+v", what, e.clock.Now().Sub(Epoch), got, want)
	}
}

// checkTTL checks that the store keeps (policy, key) for ResetAfter to
// ResetAfter+1ms, when the harness can tell.
func (e *env) checkTTL(p sluice.Policy, key string, last sluice.Result) {
	e.t.Helper()
	if e.h.TTL == nil {
		return
	}
	ttl, ok := e.h.TTL(p.Name, key)
	if !ok || ttl < last.ResetAfter || ttl > last.ResetAfter+time.Millisecond {
		e.t.Fatalf("TTL %v (held %v) after %+v: want ResetAfter to ResetAfter+1ms", ttl, ok, last)
	}
}

// testSlotVectors: L+1 acquisitions admit exactly L, each reporting the slots
// left; the denial waits exactly until the oldest lease ends, 1µs earlier is
// still denied; the state is kept exactly as long as its newest lease.
func testSlotVectors(t *testing.T, open Opener) {
	e := slotEnv(t, open)
	p := slotPolicy("cv", 3)
	l := e.limiter(p)
	e.wantSlot("peek on a fresh key", e.held(l, "k"), true, 3, 0, 0)
	if e.h.TTL != nil {
		if ttl, ok := e.h.TTL(p.Name, "k"); ok {
			t.Fatalf("a peek on a fresh key stored state (TTL %v)", ttl)
		}
	}
	tokens := map[string]bool{}
	for i, at := range []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond} {
		e.at(at)
		res, slot := e.acquire(l, "k")
		e.wantSlot("acquisition", res, true, int64(2-i), 0, time.Second)
		e.checkTTL(p, "k", res)
		if slot.Token() == "" || tokens[slot.Token()] || slot.Key() != "k" {
			t.Fatalf("slot %d: token %q key %q (tokens so far %v)", i, slot.Token(), slot.Key(), tokens)
		}
		tokens[slot.Token()] = true
	}
	e.at(400 * time.Millisecond)
	res, _ := e.acquire(l, "k")
	e.wantSlot("the 4th of 3", res, false, 0, 600*time.Millisecond, 850*time.Millisecond)
	e.wantSlot("peek when full", e.held(l, "k"), true, 0, 0, 850*time.Millisecond)
	if res, _ := e.acquire(l, "other"); !res.Allowed {
		t.Fatalf("another key shares the slots: %+v", res)
	}
	e.at(time.Second - time.Microsecond)
	res, _ = e.acquire(l, "k")
	e.wantSlot("1µs before the oldest lease ends", res, false, 0, time.Microsecond, 250*time.Millisecond+time.Microsecond)
	e.at(time.Second)
	res, _ = e.acquire(l, "k")
	e.wantSlot("when the oldest lease ends", res, true, 0, 0, time.Second)
	e.checkTTL(p, "k", res)
	e.at(2 * time.Second)
	e.wantSlot("when every lease has ended", e.held(l, "k"), true, 3, 0, 0)
}

// testSlotRelease: a release gives exactly one slot back, once; a reused,
// wrong or foreign token releases nothing.
func testSlotRelease(t *testing.T, open Opener) {
	e := slotEnv(t, open)
	p := slotPolicy("cr", 2)
	l := e.limiter(p)
	other := e.limiter(slotPolicy("cr2", 2))
	_, a := e.acquire(l, "k")
	e.at(10 * time.Millisecond)
	_, b := e.acquire(l, "k")
	_, foreign := e.acquire(l, "k2")
	_, foreignPolicy := e.acquire(other, "k")
	for _, bad := range []string{"", "x", a.Token() + "0", a.Token()[1:], foreign.Token(), foreignPolicy.Token(), sluice.NewSlotToken()} {
		if e.release(l, "k", bad) {
			t.Fatalf("Release with token %q released a slot", bad)
		}
	}
	if e.release(l, "k2", a.Token()) {
		t.Fatal("a slot of k was released as k2's")
	}
	e.wantSlot("after the wrong releases", e.held(l, "k"), true, 0, 0, time.Second)
	if ok, err := b.Release(e.ctx); !ok || err != nil {
		t.Fatalf("Release of the newest slot: %v, %v", ok, err)
	}
	// Only the oldest is held now: kept until its own lease ends.
	res := e.held(l, "k")
	e.wantSlot("after one release", res, true, 1, 0, 990*time.Millisecond)
	e.checkTTL(p, "k", res)
	if ok, err := b.Release(e.ctx); ok || err != nil {
		t.Fatalf("a second Release of one Slot: %v, %v", ok, err)
	}
	if e.release(l, "k", b.Token()) {
		t.Fatal("a released token released a slot again")
	}
	res, c := e.acquire(l, "k")
	e.wantSlot("acquisition after a release", res, true, 0, 0, time.Second)
	if res, _ := e.acquire(l, "k"); res.Allowed {
		t.Fatalf("a release freed more than one slot: %+v", res)
	}
	for _, s := range []*sluice.Slot{a, c} {
		if !e.release(l, "k", s.Token()) {
			t.Fatalf("Release(%q) of a held slot: false", s.Token())
		}
	}
	e.wantSlot("after releasing every slot", e.held(l, "k"), true, 2, 0, 0)
	if e.h.TTL != nil {
		if ttl, ok := e.h.TTL(p.Name, "k"); ok {
			t.Fatalf("a key holding no slot is still stored (TTL %v)", ttl)
		}
	}
}

// testSlotLease: a slot never released returns when its lease ends, and its
// token then releases nothing; the key is then back to initial.
func testSlotLease(t *testing.T, open Opener) {
	e := slotEnv(t, open)
	p := slotPolicy("cl", 2)
	l := e.limiter(p)
	_, a := e.acquire(l, "k")
	e.at(300 * time.Millisecond)
	_, b := e.acquire(l, "k")
	e.at(time.Second - time.Microsecond)
	if res, _ := e.acquire(l, "k"); res.Allowed {
		t.Fatalf("acquired 1µs before a lease ended: %+v", res)
	}
	e.at(time.Second)
	res, c := e.acquire(l, "k")
	e.wantSlot("when the first lease ends", res, true, 0, 0, time.Second)
	if e.release(l, "k", a.Token()) {
		t.Fatal("the token of a slot whose lease ended released a slot")
	}
	e.wantSlot("after releasing an expired token", e.held(l, "k"), true, 0, 0, time.Second)
	e.at(2 * time.Second)
	if e.release(l, "k", b.Token()) || e.release(l, "k", c.Token()) {
		t.Fatal("a token released a slot after its lease ended")
	}
	e.wantSlot("after every lease", e.held(l, "k"), true, 2, 0, 0)
	// Time that runs backwards counts as none passing.
	e.at(5 * time.Second)
	e.acquire(l, "b")
	e.acquire(l, "b")
	e.at(4 * time.Second)
	res, _ = e.acquire(l, "b")
	e.wantSlot("a second back in time", res, false, 0, time.Second, time.Second)
}
