package memory

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/storetest"
)

// The byte budget charges a sliding log for its buffer, whose capacity the
// store tracks without seeing it: after any sequence of admissions, denials,
// peeks and time passing, the tracked capacity is the buffer's, and the
// shard's and the policy's byte counts add up.
func TestLogCapTracksBuffer(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := New(WithClock(clock))
	p := &sluice.Policy{Name: "log", Algorithm: sluice.SlidingLog, Limit: 40, Period: time.Second}
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	keys := []string{"a", "b", "c"}
	for step := range 5_000 {
		key := keys[rng.IntN(len(keys))]
		cost := int64(rng.IntN(3)) // peeks too
		if rng.IntN(2) == 0 {
			if err := s.DecideAll(ctx, []sluice.Request{{Policy: p, Key: key, Cost: cost}}, make([]sluice.Result, 1)); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.Decide(ctx, sluice.Request{Policy: p, Key: key, Cost: cost}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
		var total int64
		for i := range s.shards {
			sh := &s.shards[i]
			var sum int64
			for _, e := range entriesOf(sh) {
				var log sluice.Log
				if e.log != nil {
					log = *e.log
				}
				if got := reflect.ValueOf(log).FieldByName("buf").Cap(); got != int(e.logCap) {
					t.Fatalf("step %d key %q: tracked log capacity %d, buffer %d", step, e.key.String(), e.logCap, got)
				}
				sum += entryBytes(e.key.len(), e.logCap)
			}
			if sum != sh.bytes {
				t.Fatalf("step %d: shard charges %d bytes, its entries %d", step, sh.bytes, sum)
			}
			total += sum
		}
		if u := s.budgets.usage("log"); u.bytes.Load() != total || int(u.keys.Load()) != s.Len() {
			t.Fatalf("step %d: policy counts %d keys %d bytes, store %d keys %d bytes", step, u.keys.Load(), u.bytes.Load(), s.Len(), total)
		}
	}
}

// safeAt: a bucket becomes safe to drop as it drains, a window only at its
// reset, and a key within the slack at once.
func TestSafeAt(t *testing.T) {
	const now = 1_000_000
	gcra := &sluice.Policy{Name: "g", Algorithm: sluice.GCRA, Limit: 640, Period: 640 * time.Second} // T = 1s, slack 10
	window := &sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 640, Period: time.Hour}
	small := &sluice.Policy{Name: "s", Algorithm: sluice.SlidingLog, Limit: 5, Period: time.Minute} // slack 0
	for _, c := range []struct {
		name    string
		p       *sluice.Policy
		used    int64
		expires int64
		want    int64
	}{
		{"bucket within slack", gcra, 10, now + 10e6, now},
		{"bucket drains to slack", gcra, 30, now + 30e6, now + 20e6},
		{"window within slack", window, 10, now + 3600e6, now},
		{"window at reset", window, 11, now + 3600e6, now + 3600e6},
		{"small limit, one used", small, 1, now + 60e6, now + 60e6},
		{"small limit, none used", small, 0, now + 60e6, now},
	} {
		res := sluice.Result{Remaining: c.p.Capacity() - c.used}
		if got := safeAt(c.p, &res, now, c.expires); got != c.want {
			t.Errorf("%s: safeAt %d, want %d", c.name, got-now, c.want-now)
		}
	}
}
