package memory_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func mustLimiter(t testing.TB, s sluice.Store, p sluice.Policy) *sluice.Limiter {
	t.Helper()
	l, err := sluice.New(s, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A key-rotation attack cannot grow the store past WithMaxKeys.
func TestMaxKeysBoundsKeyRotation(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(5000))
	l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Hour})
	ctx := context.Background()
	for i := range 200_000 {
		if _, err := l.Allow(ctx, fmt.Sprintf("attacker-%d", i)); err != nil {
			t.Fatal(err)
		}
		if i%10_000 == 0 && s.Len() > 5000 {
			t.Fatalf("after %d keys the store holds %d > 5000", i, s.Len())
		}
	}
	if n := s.Len(); n > 5000 || n < 4000 {
		t.Fatalf("store holds %d keys, want at most 5000 and close to it", n)
	}
}

// When full, the store evicts only keys that are safe to drop (used at most
// 1/64 of their capacity), the closest to their reset first; a key that has
// used more is never evicted. A policy alone in the store fills 7/8 of it: the
// rest is kept for other policies.
func TestEvictsOnlySafeKeys(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(64)) // one shard of 64
	l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 100, Period: time.Hour, Burst: 100})
	ctx := context.Background()
	for i := range 56 {
		cost := int64(1) // light: safe to drop
		if i%2 == 0 {
			cost = 2 // heavy: used more than 100/64, never dropped
		}
		if r, _ := l.AllowN(ctx, fmt.Sprint("k", i), cost); !r.Allowed {
			t.Fatalf("key %d denied", i)
		}
	}
	for i := range 16 {
		if r, _ := l.Allow(ctx, fmt.Sprint("new", i)); !r.Allowed {
			t.Fatalf("new key %d denied while light keys could be dropped: %+v", i, r)
		}
	}
	if s.Len() != 56 {
		t.Fatalf("store holds %d keys, want 56 (7/8 of 64)", s.Len())
	}
	for i := 0; i < 56; i += 2 {
		if _, ok := s.TTL("p", fmt.Sprint("k", i)); !ok {
			t.Fatalf("heavy key k%d was evicted", i)
		}
	}
	if st := s.Stats(); st.Evicted != 16 || st.Refused != 0 {
		t.Fatalf("stats %+v, want 16 evicted and none refused", st)
	}
}

// Keys whose state is back to initial are forgotten: at once when touched, and
// by the sweep that each new key performs otherwise.
func TestIdleKeysAreDropped(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock))
	l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second})
	ctx := context.Background()
	for i := range 1000 {
		l.Allow(ctx, fmt.Sprint("old", i))
	}
	clock.Advance(time.Second)
	l.AllowN(ctx, "old0", 0) // a peek after the reset forgets the key at once
	if _, ok := s.TTL("p", "old0"); ok || s.Len() != 999 {
		t.Fatalf("after a peek on an expired key: held=%v, Len %d, want forgotten and 999", ok, s.Len())
	}
	for i := range 1000 {
		l.Allow(ctx, fmt.Sprint("new", i))
	}
	if n := s.Len(); n > 1400 {
		t.Fatalf("Len %d after 1000 expired and 1000 new keys: the sweep is not reclaiming", n)
	}
	for i := range 2000 {
		l.Allow(ctx, fmt.Sprint("newer", i))
	}
	if n := s.Len(); n > 3000+10 {
		t.Fatalf("Len %d: expired keys still held", n)
	}
}

// A decision on an existing key allocates nothing, for every algorithm.
func TestZeroAllocsOnExistingKey(t *testing.T) {
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			s := memory.New(memory.WithClock(clock))
			l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: a, Limit: 100, Period: time.Second})
			ctx := context.Background()
			step := func() {
				clock.Advance(7 * time.Millisecond) // keeps the log's ring in steady state
				if _, err := l.Allow(ctx, "hot"); err != nil {
					t.Fatal(err)
				}
			}
			for range 1000 {
				step()
			}
			if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
				t.Fatalf("%v allocations per decision, want 0", allocs)
			}
		})
	}
}

// The default clock is the system's: decisions use real time.
func TestDefaultClock(t *testing.T) {
	s := memory.New()
	l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour})
	r, err := l.Allow(context.Background(), "k")
	if err != nil || !r.Allowed {
		t.Fatalf("%+v %v", r, err)
	}
	// The window is aligned to the epoch: ResetAfter is the time to the next hour.
	want := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour))
	if d := r.ResetAfter - want; d < -time.Second || d > time.Second {
		t.Fatalf("ResetAfter %v, want about %v", r.ResetAfter, want)
	}
}

// TestKeyRotationMemoryBounded: an attacker sending a fresh key with every
// request (rotationKeys of them, 2 million without the race detector) never
// makes the store hold more than WithMaxKeys keys, and its heap stays what it
// was once full: memory is proportional to the bound, not to the number of
// keys ever seen. Nothing expires during the attack (the fake clock stands
// still), so every new key past the bound costs an eviction.
func TestKeyRotationMemoryBounded(t *testing.T) {
	const maxKeys = 1 << 16
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(maxKeys))
	// 1 of 1,000 used: each attacker key is safe to drop, so the store evicts
	// them and keeps admitting (bounds_attack_test.go covers keys it may not drop).
	p := &sluice.Policy{Name: "per_key", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Hour}
	ctx := context.Background()
	buf := make([]byte, 0, 32)
	send := func(i int) {
		buf = strconv.AppendInt(append(buf[:0], "attacker-"...), int64(i), 10)
		res, err := s.Decide(ctx, sluice.Request{Policy: p, Key: string(buf), Cost: 1})
		if err != nil || !res.Allowed {
			t.Fatalf("key %d: %+v %v", i, res, err)
		}
	}
	for i := range maxKeys {
		send(i)
	}
	if n := s.Len(); n < maxKeys*8/10 || n > maxKeys {
		t.Fatalf("after %d distinct keys the store holds %d, want at most %d and close to it", maxKeys, n, maxKeys)
	}
	full := heapInUse()

	for i := maxKeys; i < rotationKeys; i++ {
		send(i)
		if i%8192 == 0 {
			if n := s.Len(); n > maxKeys {
				t.Fatalf("after %d distinct keys the store holds %d > %d", i+1, n, maxKeys)
			}
		}
	}
	if n := s.Len(); n > maxKeys {
		t.Fatalf("after %d distinct keys the store holds %d > %d", rotationKeys, n, maxKeys)
	}
	after := heapInUse()
	runtime.KeepAlive(s)

	// A full 64k-key store is about 16 MB of heap. Allow a quarter more, plus
	// slack for the runtime's and the test binary's own noise.
	limit := full + full/4 + 4<<20
	t.Logf("%d distinct keys, bound %d: heap in use %.1f MB when full, %.1f MB after the rotation",
		rotationKeys, maxKeys, float64(full)/(1<<20), float64(after)/(1<<20))
	if after > limit {
		t.Fatalf("heap in use grew from %d to %d bytes (limit %d) over %d keys: memory follows the keys seen, not the bound",
			full, after, limit, rotationKeys)
	}
}

// heapInUse returns the heap in use after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC() // the second cycle frees what the first one's finalizers released
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A denial leaves the state as it is, but a policy changed since may keep that
// state longer (a longer period) or make it unsafe to drop sooner (a smaller
// capacity): the store then keeps it for as long, and does not evict it.
func TestDenialUnderAChangedPolicyKeepsTheState(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch) // on an hour's start
	s := memory.New(memory.WithClock(clock))
	minute := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute})
	hour := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour})
	ctx := context.Background()
	for range 2 {
		if res, _ := minute.Allow(ctx, "k"); !res.Allowed {
			t.Fatal("denied within the limit")
		}
	}
	clock.Advance(30 * time.Second)
	if res, _ := hour.Allow(ctx, "k"); res.Allowed || res.ResetAfter != time.Hour-30*time.Second {
		t.Fatalf("under the hour's window: %+v, want denied until the hour ends", res)
	}
	if ttl, ok := s.TTL("p", "k"); !ok || ttl != time.Hour-30*time.Second {
		t.Fatalf("TTL %v (held %v), want the hour's window to its end", ttl, ok)
	}
	clock.Advance(5 * time.Minute) // past the minute's window: a sweep would forget the state
	for i := range 100 {
		hour.Allow(ctx, fmt.Sprint("sweep", i))
	}
	if res, _ := hour.Allow(ctx, "k"); res.Allowed {
		t.Fatal("the state was forgotten at the minute's end")
	}

	// A capacity that shrank makes a state that was safe to drop unsafe.
	clock = storetest.NewClock(storetest.Epoch)
	s = memory.New(memory.WithClock(clock), memory.WithMaxKeys(1))
	big := mustLimiter(t, s, sluice.Policy{Name: "q", Algorithm: sluice.FixedWindow, Limit: 6400, Period: time.Hour})
	small := mustLimiter(t, s, sluice.Policy{Name: "q", Algorithm: sluice.FixedWindow, Limit: 64, Period: time.Hour})
	if res, _ := big.AllowN(ctx, "victim", 64); !res.Allowed { // 64 of 6,400: within the slack, safe to drop
		t.Fatal("denied within the limit")
	}
	if res, _ := small.Allow(ctx, "victim"); res.Allowed { // 64 of 64: not safe to drop any more
		t.Fatal("admitted past the lowered limit")
	}
	if res, _ := small.Allow(ctx, "attacker"); !res.Allowed || s.Stats().Spilled != 1 {
		t.Fatalf("a new key on a full store: %+v, stats %+v; want it admitted and kept in the compact part", res, s.Stats())
	}
	if res, _ := small.Allow(ctx, "victim"); res.Allowed {
		t.Fatal("the victim's state was forgotten")
	}
}

// A key of up to 15 bytes is held inside its entry: once the store has
// room, storing a new one allocates nothing (a longer key allocates its copy).
func TestNewShortKeyAllocatesNothing(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock))
	// Each state lasts a millisecond and the clock moves a microsecond per
	// key, so about a thousand keys are live and sweeping keeps up.
	l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Millisecond})
	ctx := context.Background()
	keys := numbered("user-", 50_000)
	next := 0
	step := func() {
		clock.Advance(time.Microsecond)
		if _, err := l.Allow(ctx, keys[next%len(keys)]); err != nil {
			t.Fatal(err)
		}
		next++
	}
	for range 2 * len(keys) {
		step()
	}
	if allocs := testing.AllocsPerRun(10_000, step); allocs > 0.01 {
		t.Fatalf("%v allocations per new key, want 0", allocs)
	}
	if n := s.Len(); n > 4_000 {
		t.Fatalf("%d keys stored, want about 1,000", n)
	}
}

// A decision on a key held in the compact part allocates nothing either,
// but for a sliding log, which rebuilds its one entry into a log (one
// allocation).
func TestZeroAllocsInCompactPart(t *testing.T) {
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			s := memory.NewCompactFirst(memory.WithClock(clock))
			l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: a, Limit: 10_000, Period: time.Hour})
			ctx := context.Background()
			keys := numbered("k", 1000)
			next := 0
			step := func() {
				clock.Advance(time.Microsecond)
				// Every other round a peek; a log only peeks after its
				// first entry (a second would move it to the exact part).
				cost := int64(next / len(keys) % 2)
				if next < len(keys) || a == sluice.SlidingLog {
					cost = int64(max(0, 1-next/len(keys)))
				}
				if _, err := l.AllowN(ctx, keys[next%len(keys)], cost); err != nil {
					t.Fatal(err)
				}
				next++
			}
			for range 2 * len(keys) {
				step()
			}
			allocs := testing.AllocsPerRun(1000, step)
			if st := s.Stats(); st.Keys != 0 || st.ColdKeys != len(keys) {
				t.Fatalf("stats %+v: want every key in the compact part", st)
			}
			want := 0.0
			if a == sluice.SlidingLog {
				want = 1
			}
			if allocs > want {
				t.Fatalf("%v allocations per decision, want %v", allocs, want)
			}
		})
	}
}
