package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func slotLimiter(t *testing.T, s *memory.Store, limit int64) *sluice.Limiter {
	t.Helper()
	l, err := sluice.New(s, sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: limit, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A key whose slots have all expired is forgotten: nothing is held for it.
func TestSlotsIdleExpiry(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock))
	l := slotLimiter(t, s, 3)
	for range 3 {
		if res, _, err := l.Acquire(ctx, "k"); err != nil || !res.Allowed {
			t.Fatalf("%+v, %v", res, err)
		}
	}
	if st := s.Stats(); st.Keys != 1 || st.Bytes == 0 {
		t.Fatalf("holding 3 slots: %+v", st)
	}
	clock.Advance(time.Second)
	if ttl, ok := s.TTL("c", "k"); ok {
		t.Fatalf("TTL %v after every lease ended", ttl)
	}
	if res, err := l.Held(ctx, "k"); err != nil || res.Remaining != 3 {
		t.Fatalf("%+v, %v", res, err)
	}
	if st := s.Stats(); st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("a key whose slots expired is still held: %+v", st)
	}
}

// A key's slots are charged to the byte bound as they grow, and shrink back
// after a burst: when the bound leaves no room for more, an acquisition is
// denied (and counted as refused), never admitted uncounted.
func TestSlotsBounded(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	const maxBytes = 64 << 10
	s := memory.New(memory.WithClock(clock), memory.WithMaxBytes(maxBytes))
	l := slotLimiter(t, s, sluice.MaxConcurrencyLimit)
	var slots []*sluice.Slot
	for {
		res, slot, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if !res.Allowed {
			if res.RetryAfter <= 0 {
				t.Fatalf("refused without a RetryAfter: %+v", res)
			}
			break
		}
		slots = append(slots, slot)
		if len(slots) == sluice.MaxConcurrencyLimit {
			t.Fatalf("%d slots held within %d bytes", len(slots), maxBytes)
		}
	}
	st := s.Stats()
	if st.Bytes > maxBytes || st.Refused == 0 || len(slots) < 100 {
		t.Fatalf("%d slots held: %+v", len(slots), st)
	}
	full := st.Bytes
	for _, slot := range slots[4:] {
		if ok, err := slot.Release(ctx); !ok || err != nil {
			t.Fatalf("release: %v, %v", ok, err)
		}
	}
	if st := s.Stats(); st.Bytes*8 > full {
		t.Fatalf("4 slots left of %d charge %d bytes, %d when all were held", len(slots), st.Bytes, full)
	}
}

// A key holding slots is never moved to the compact part, which cannot hold
// its tokens, however much pressure keys in use put on the exact part: here
// keys of its own policy whose sets grow, which may move others there.
func TestSlotsNeverCompact(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxBytes(64<<10))
	l := slotLimiter(t, s, 100)
	var slots []*sluice.Slot
	for range 3 {
		res, slot, err := l.Acquire(ctx, "k")
		if err != nil || !res.Allowed {
			t.Fatalf("%+v, %v", res, err)
		}
		slots = append(slots, slot)
	}
	for round := range 3 {
		for i := range 500 {
			for range 5 { // the fifth grows the key's set
				if _, _, err := l.Acquire(ctx, strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		clock.Advance(time.Millisecond * time.Duration(round+1))
	}
	if st := s.Stats(); st.Refused == 0 || st.ColdKeys != 0 {
		t.Fatalf("no pressure, or slots in the compact part: %+v", st)
	}
	if res, err := l.Held(ctx, "k"); err != nil || res.Remaining != 97 {
		t.Fatalf("the slots under pressure: %+v, %v", res, err)
	}
	for _, slot := range slots {
		if ok, err := slot.Release(ctx); !ok || err != nil {
			t.Fatalf("release after the pressure: %v, %v", ok, err)
		}
	}
}
