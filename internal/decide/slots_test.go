package decide

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func inflight(name string, limit int64) *sluice.Policy {
	return &sluice.Policy{Name: name, Algorithm: sluice.Concurrency, Limit: limit, Period: time.Minute}
}

func newSlotStore() *memory.Store {
	return memory.New(memory.WithClock(storetest.NewClock(storetest.Epoch)))
}

// free peeks at the slots p has free for key.
func free(t *testing.T, st sluice.SlotStore, p *sluice.Policy, key string) int64 {
	t.Helper()
	r, _, err := st.AcquireSlot(context.Background(), sluice.Request{Policy: p, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

// TestSlotsAcquiredAndReleased: an admitted request holds a slot per
// concurrency check, with a token that Release gives back; a request over
// the limit is denied and holds nothing.
func TestSlotsAcquiredAndReleased(t *testing.T) {
	st, p := newSlotStore(), inflight("inflight", 2)
	var held [][]Check
	for i := range 2 {
		checks := []Check{check(p, "k", 1, 0)}
		out, res := decide(t, st, checks, false)
		if !out.Allowed || checks[0].Token == "" || res[0].Remaining != int64(1-i) {
			t.Fatalf("request %d: %+v %+v token %q", i, out, res, checks[0].Token)
		}
		held = append(held, checks)
	}
	checks := []Check{check(p, "k", 1, 0)}
	out, res := decide(t, st, checks, false)
	if out.Allowed || checks[0].Token != "" || checks[0].Flags&Exhausted == 0 || res[0].RetryAfter <= 0 {
		t.Fatalf("third request: %+v %+v flags %v token %q, want denied and exhausted", out, res, checks[0].Flags, checks[0].Token)
	}
	if err := Release(context.Background(), st, held[0]); err != nil {
		t.Fatal(err)
	}
	if held[0][0].Token != "" {
		t.Error("Release left the token")
	}
	if got := free(t, st, p, "k"); got != 1 {
		t.Fatalf("%d free after a release, want 1", got)
	}
}

// TestSlotsAllOrNothing: when a rate check denies, the slot acquired for the
// request is given back (and reported free); when a slot is denied, the rate
// check is only peeked at, so it is charged nothing.
func TestSlotsAllOrNothing(t *testing.T) {
	st := newSlotStore()
	p, rate := inflight("inflight", 1), fixed("rate", 1)
	ctx := context.Background()
	if _, err := st.Decide(ctx, sluice.Request{Policy: rate, Key: "spent", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	checks := []Check{check(p, "k", 1, 0), check(rate, "spent", 1, 0)}
	out, res := decide(t, st, checks, false)
	if out.Allowed || res[0].Allowed || checks[0].Token != "" || res[0].Remaining != 1 || res[0].RetryAfter != res[1].RetryAfter {
		t.Fatalf("rate denies: %+v %+v token %q", out, res, checks[0].Token)
	}
	if checks[0].Flags&Exhausted != 0 || checks[1].Flags&Exhausted == 0 {
		t.Errorf("flags %v %v, want only the rate exhausted", checks[0].Flags, checks[1].Flags)
	}
	if got := free(t, st, p, "k"); got != 1 {
		t.Fatalf("%d slots free after a denied request, want 1: it must hold nothing", got)
	}

	// Take the one slot, then a request denied by it peeks at the rate.
	holder := []Check{check(p, "k", 1, 0)}
	if out, _ := decide(t, st, holder, false); !out.Allowed {
		t.Fatal("the slot was not acquired")
	}
	checks = []Check{check(p, "k", 1, 0), check(rate, "fresh", 1, 0)}
	out, res = decide(t, st, checks, false)
	if out.Allowed || res[1].Allowed || checks[0].Flags&Exhausted == 0 {
		t.Fatalf("slot denies: %+v %+v", out, res)
	}
	if r := remaining(t, st, rate, "fresh"); r != 1 {
		t.Errorf("rate has %d left after a request its slot denied, want 1", r)
	}
}

// TestSlotsBlockedAndShadow: a blocked request peeks at its slots; a shadow
// slot of an admitted request is acquired, never denies, and is released
// like the others.
func TestSlotsBlockedAndShadow(t *testing.T) {
	st := newSlotStore()
	p, shadow := inflight("inflight", 1), inflight("shadow", 1)
	checks := []Check{check(p, "k", 1, 0)}
	if out, res := decide(t, st, checks, true); out.Allowed || !out.Blocked || res[0].Remaining != 1 || checks[0].Token != "" {
		t.Fatalf("refused: %+v %+v", out, res)
	}
	first := []Check{check(p, "a", 1, 0), check(shadow, "k", 1, Shadow)}
	if out, res := decide(t, st, first, false); !out.Allowed || !res[1].Allowed || first[1].Token == "" {
		t.Fatalf("first: %+v %+v", out, res)
	}
	second := []Check{check(p, "b", 1, 0), check(shadow, "k", 1, Shadow)}
	out, res := decide(t, st, second, false)
	if !out.Allowed || res[1].Allowed || second[1].Flags&Exhausted == 0 || second[1].Token != "" {
		t.Fatalf("second: %+v %+v, want admitted, the shadow slot would have denied", out, res)
	}
	for _, c := range [][]Check{first, second} {
		if err := Release(context.Background(), st, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b"} {
		if got := free(t, st, p, k); got != 1 {
			t.Errorf("%s: %d free after release, want 1", k, got)
		}
	}
	if got := free(t, st, shadow, "k"); got != 1 {
		t.Errorf("shadow: %d free after release, want 1", got)
	}
}

// TestSlotsNeedSlotStore: a store that holds no slots is an error, not an
// admission.
func TestSlotsNeedSlotStore(t *testing.T) {
	st := newStore() // hides the memory store's slot methods
	res := make([]sluice.Result, 1)
	out, err := Decide(context.Background(), st, []Check{check(inflight("p", 1), "k", 1, 0)}, res, false)
	if err == nil || out.Allowed {
		t.Fatalf("got %+v, %v; want an error", out, err)
	}
}
