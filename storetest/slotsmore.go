package storetest

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testSlotChange: a policy changed under held slots applies its new limit
// and lease to them at once, like every other policy change.
func testSlotChange(t *testing.T, open Opener) {
	e := slotEnv(t, open)
	l3 := e.limiter(slotPolicy("cc", 3))
	var slots []*sluice.Slot
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
		e.at(at)
		_, s := e.acquire(l3, "k")
		slots = append(slots, s)
	}
	e.at(300 * time.Millisecond)
	l2 := e.limiter(slotPolicy("cc", 2))
	res, _ := e.acquire(l2, "k")
	e.wantSlot("3 held under a limit lowered to 2", res, false, 0, 800*time.Millisecond, 900*time.Millisecond)
	if !e.release(l2, "k", slots[2].Token()) {
		t.Fatal("a slot acquired before the change was not released after it")
	}
	res, _ = e.acquire(l2, "k")
	e.wantSlot("2 held under 2", res, false, 0, 700*time.Millisecond, 800*time.Millisecond)
	short := slotPolicy("cc", 2)
	short.Period = 500 * time.Millisecond
	ls := e.limiter(short)
	res, _ = e.acquire(ls, "k")
	e.wantSlot("a lease shortened to 500ms", res, false, 0, 200*time.Millisecond, 300*time.Millisecond)
	e.at(500 * time.Millisecond)
	res, _ = e.acquire(ls, "k")
	e.wantSlot("when the shortened lease ends", res, true, 0, 0, 500*time.Millisecond)
}

// testSlotReference runs random traces of acquisitions, releases (of held,
// released, expired and made-up tokens), peeks and time passing (also
// backwards) on a few keys, and checks every answer against the pure core,
// sluice.AcquireSlot and sluice.ReleaseSlot, on a model the suite keeps.
func testSlotReference(t *testing.T, open Opener) {
	for _, p := range []sluice.Policy{slotPolicy("r1", 1), slotPolicy("r3", 3), {Name: "r5", Algorithm: sluice.Concurrency, Limit: 5, Period: 100 * time.Millisecond}} {
		t.Run(p.Name, func(t *testing.T) {
			e := slotEnv(t, open)
			l := e.limiter(p)
			rng := rand.New(rand.NewPCG(7, uint64(p.Limit)))
			keys := []string{"a", "b"}
			model := map[string][]sluice.HeldSlot{}
			var tokens []string // every token given out, and made-up ones
			period := us(p.Period)
			for i := 0; i < 300; i++ {
				key := keys[rng.IntN(len(keys))]
				switch op := rng.IntN(20); {
				case op < 4:
					e.clock.Advance(time.Duration(rng.Int64N(period/2)+1) * time.Microsecond)
				case op == 4:
					e.clock.Advance(-time.Duration(rng.Int64N(period/4)+1) * time.Microsecond)
				case op < 12:
					got, slot := e.acquire(l, key)
					next, want := sluice.AcquireSlot(&p, model[key], e.nowMicros(), "placeholder")
					if want.Allowed {
						next[len(next)-1].Token = slot.Token()
						tokens = append(tokens, slot.Token())
					}
					model[key] = next
					if got != want {
						t.Fatalf("step %d: Acquire(%q) = %+v, want %+v", i, key, got, want)
					}
				case op < 17 && len(tokens) > 0:
					tok := tokens[rng.IntN(len(tokens))]
					var want bool
					model[key], want = sluice.ReleaseSlot(&p, model[key], e.nowMicros(), tok)
					if got := e.release(l, key, tok); got != want {
						t.Fatalf("step %d: Release(%q, %q) = %v, want %v", i, key, tok, got, want)
					}
				case op == 17:
					tokens = append(tokens, sluice.NewSlotToken())
				default:
					var want sluice.Result
					model[key], want = sluice.AcquireSlot(&p, model[key], e.nowMicros(), "")
					if got := e.held(l, key); got != want {
						t.Fatalf("step %d: Held(%q) = %+v, want %+v", i, key, got, want)
					}
				}
			}
		})
	}
}

// testSlotConcurrent: with time frozen, concurrent callers acquire exactly
// the limit between them, and concurrent releases give every slot back.
func testSlotConcurrent(t *testing.T, open Opener) {
	e := slotEnv(t, open)
	l := e.limiter(slotPolicy("cn", 20))
	const workers, each = 8, 10
	var mu sync.Mutex
	var slots []*sluice.Slot
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				res, s, err := l.Acquire(e.ctx, "k")
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					mu.Lock()
					slots = append(slots, s)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(slots) != 20 {
		t.Fatalf("%d callers acquired %d slots of 20", workers, len(slots))
	}
	for _, s := range slots {
		wg.Go(func() {
			if ok, err := s.Release(e.ctx); !ok || err != nil {
				t.Errorf("Release: %v, %v", ok, err)
			}
		})
	}
	wg.Wait()
	if res := e.held(l, "k"); res.Remaining != 20 {
		t.Fatalf("after every release: %+v, want 20 free", res)
	}
}

// testSlotAcquireAll: a slot and a rate limit together are admitted all or
// nothing: a slot denied consumes none of the rate, and a rate denied gives
// the slot back.
func testSlotAcquireAll(t *testing.T, open Opener) {
	e := slotEnv(t, open)
	sl := e.limiter(slotPolicy("as", 1))
	rate := e.limiter(sluice.Policy{Name: "ar", Algorithm: sluice.FixedWindow, Limit: 2, Period: 10 * time.Second})
	both := func() ([]sluice.Result, []*sluice.Slot) {
		t.Helper()
		rs, slots, err := sluice.AcquireAll(e.ctx, sluice.Check{Limiter: sl, Key: "k"}, sluice.Check{Limiter: rate, Key: "k"})
		if err != nil {
			t.Fatalf("AcquireAll: %v", err)
		}
		return rs, slots
	}
	rs, slots := both()
	if !rs[0].Allowed || !rs[1].Allowed || slots[0] == nil || slots[1] != nil || rs[1].Remaining != 1 {
		t.Fatalf("first set: %+v, slots %v", rs, slots)
	}
	rs, denied := both()
	if rs[0].Allowed || rs[1].Allowed || rs[0].RetryAfter != time.Second || rs[1].RetryAfter != time.Second || denied[0] != nil {
		t.Fatalf("with the slot held: %+v, slots %v; want both denied for the lease", rs, denied)
	}
	if r := e.allow(rate, "k", 0); r.Remaining != 1 {
		t.Fatalf("a set denied by its slot consumed the rate limit: %+v", r)
	}
	if err := sluice.ReleaseAll(e.ctx, slots); err != nil {
		t.Fatal(err)
	}
	rs, slots = both()
	if !rs[0].Allowed || !rs[1].Allowed || rs[1].Remaining != 0 {
		t.Fatalf("after the release: %+v", rs)
	}
	if err := sluice.ReleaseAll(e.ctx, slots); err != nil {
		t.Fatal(err)
	}
	rs, slots = both()
	if rs[0].Allowed || rs[1].Allowed || rs[0].RetryAfter != 10*time.Second || rs[1].RetryAfter != 10*time.Second || slots[0] != nil {
		t.Fatalf("with the rate spent: %+v, slots %v; want both denied for the window", rs, slots)
	}
	if rs[0].Remaining != 1 {
		t.Fatalf("the slot given back reports %+v, want 1 free", rs[0])
	}
	if r := e.held(sl, "k"); r.Remaining != 1 {
		t.Fatalf("a set denied by its rate limit kept its slot: %+v", r)
	}
}

// testSlotReset: a store that implements sluice.Resetter forgets a key's
// slots, and their tokens then release nothing.
func testSlotReset(t *testing.T, open Opener) {
	e := slotEnv(t, open)
	r, ok := e.h.Store.(sluice.Resetter)
	if !ok {
		t.Skip("the store does not implement sluice.Resetter")
	}
	p := slotPolicy("cz", 2)
	l := e.limiter(p)
	_, a := e.acquire(l, "k")
	e.acquire(l, "k")
	e.acquire(l, "other")
	if err := r.Reset(e.ctx, &p, "k"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	e.wantSlot("after Reset", e.held(l, "k"), true, 2, 0, 0)
	if e.release(l, "k", a.Token()) {
		t.Fatal("a token released a slot after Reset")
	}
	if res := e.held(l, "other"); res.Remaining != 1 {
		t.Fatalf("Reset of k also reset another key: %+v", res)
	}
}
