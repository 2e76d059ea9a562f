package memory_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// attackKeys is how many new keys each attack below sends: 30× the store's
// bound, so every key the store holds has been under pressure many times over.
const attackMaxKeys, attackKeys = 4096, 120_000

// exhaust spends all of key's limit and checks the next request is denied.
func exhaust(t *testing.T, l *sluice.Limiter, key string) {
	t.Helper()
	ctx := context.Background()
	for i := range l.Policy().Limit {
		if r, err := l.Allow(ctx, key); err != nil || !r.Allowed {
			t.Fatalf("attempt %d: %+v %v", i+1, r, err)
		}
	}
	if r, _ := l.Allow(ctx, key); r.Allowed {
		t.Fatalf("attempt %d admitted: %+v", l.Policy().Limit+1, r)
	}
}

// flood sends n requests, each for a new key, on l; it returns how many were
// admitted. The clock advances 100µs per request: time passes, but nothing of
// the victim's 15 minutes runs out.
func flood(t *testing.T, clock *storetest.Clock, l *sluice.Limiter, prefix string, n int) int {
	t.Helper()
	ctx := context.Background()
	buf := make([]byte, 0, 32)
	admitted := 0
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10)
		r, err := l.Allow(ctx, string(buf))
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		} else if r.RetryAfter <= 0 {
			t.Fatalf("key %d denied without a RetryAfter: %+v", i, r)
		}
		clock.Advance(100 * time.Microsecond)
	}
	return admitted
}

// The attack of key rotation: Alice exhausts login_attempts (sliding_log, 5 per
// 15 minutes); an attacker sends a new key per request on another policy whose
// keys reset later than hers. Eviction must not give Alice's attempts back.
func TestRotationOnAnotherPolicyKeepsVictimState(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(attackMaxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.SlidingLog, Limit: 5, Period: 15 * time.Minute})
	signup := mustLimiter(t, s, sluice.Policy{Name: "signup", Algorithm: sluice.SlidingLog, Limit: 100, Period: time.Hour})
	exhaust(t, login, "alice")

	if admitted := flood(t, clock, signup, "attacker-", attackKeys); admitted != attackKeys {
		// Each attacker key used 1 of 100: safe to drop, so all are admitted.
		t.Fatalf("%d of %d attacker keys admitted, want all", admitted, attackKeys)
	}
	r, err := login.Allow(context.Background(), "alice")
	if err != nil || r.Allowed || r.Remaining != 0 {
		t.Fatalf("after %d attacker keys on another policy Alice got %+v %v: her attempts were forgotten", attackKeys, r, err)
	}
}

// The same attack on the victim's own policy: the attacker's keys are no more
// safe to drop than Alice's. Once the exact part is full they are admitted
// and kept in the compact part (overflowing it, at 30 times what the exact
// part holds, into its floors), never at the cost of Alice's state.
func TestRotationOnTheSamePolicyKeepsVictimState(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(attackMaxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.SlidingLog, Limit: 5, Period: 15 * time.Minute})
	exhaust(t, login, "alice")

	if admitted := flood(t, clock, login, "user-", attackKeys); admitted != attackKeys {
		t.Fatalf("%d of %d new keys admitted, want all: each is within its limit", admitted, attackKeys)
	}
	if r, _ := login.Allow(context.Background(), "alice"); r.Allowed {
		t.Fatalf("Alice admitted after the flood: %+v", r)
	}
	st := s.Stats()
	if st.Keys > attackMaxKeys || st.Refused != 0 || st.Evicted != 0 || st.Spilled == 0 || st.Folded == 0 || st.Bytes > st.MaxBytes {
		t.Fatalf("stats %+v: want at most %d exact keys, none refused or evicted, keys spilled and folded, within the bytes", st, attackMaxKeys)
	}
	t.Logf("stats %+v", st)
}

// A flood of one policy's keys that may not be dropped leaves room for another
// policy's new keys in the exact part: a policy at its share of the store
// fills at most 7/8 of each shard.
func TestFloodLeavesRoomForOtherPolicies(t *testing.T) {
	// Shards of 1,024 keys, so the eighth kept in each (128) is far above the
	// 64 or so of the other policy's new keys that hashing puts in any shard.
	const maxKeys, others = 1 << 16, 1 << 12
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(maxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.SlidingLog, Limit: 5, Period: 15 * time.Minute})
	api := mustLimiter(t, s, sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour})
	flood(t, clock, login, "user-", 2*maxKeys)
	if st := s.Stats(); st.Keys > maxKeys*7/8 {
		t.Fatalf("the flood got %d keys into the exact part, more than 7/8 of %d", st.Keys, maxKeys)
	}
	spilled := s.Stats().Spilled
	if admitted := flood(t, clock, api, "client-", others); admitted != others {
		t.Fatalf("only %d of %d new keys of another policy admitted after the flood", admitted, others)
	}
	if st := s.Stats(); st.Spilled != spilled {
		t.Fatalf("%d of the other policy's new keys went to the compact part, want none", st.Spilled-spilled)
	}
}

// Two policies flooded at once, past what the compact part holds, leave a
// third its new keys: each of them decided as on an empty store (the floors
// the floods fold into count only for the policies folded into them).
func TestFloodOfTwoPoliciesLeavesAThird(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxBytes(1<<20))
	a := mustLimiter(t, s, sluice.Policy{Name: "a", Algorithm: sluice.SlidingLog, Limit: 5, Period: 15 * time.Minute})
	b := mustLimiter(t, s, sluice.Policy{Name: "b", Algorithm: sluice.GCRA, Limit: 5, Period: 15 * time.Minute})
	third := sluice.Policy{Name: "c", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Hour}
	c := mustLimiter(t, s, third)
	for round := range 4 { // 80,000 new keys: the compact part (28,672 slots) overflows
		flood(t, clock, a, fmt.Sprint("a-", round, "-"), 10_000)
		flood(t, clock, b, fmt.Sprint("b-", round, "-"), 10_000)
	}
	ctx := context.Background()
	for i := range 100 {
		key := "c-" + strconv.Itoa(i)
		empty := mustLimiter(t, memory.New(memory.WithClock(clock)), third)
		for range third.Limit + 1 {
			got, err := c.Allow(ctx, key)
			want, _ := empty.Allow(ctx, key)
			if err != nil || got != want {
				t.Fatalf("new key %d of a third policy after two floods: got %+v %v, want %+v", i, got, err, want)
			}
		}
	}
	if st := s.Stats(); st.Folded == 0 {
		t.Fatalf("stats %+v: the floods folded nothing", st)
	}
}

// A store too small for a compact part (a byte budget under 2,584 bytes) still
// denies a new key when full, as a decision and not an error, and admits new
// keys again once the flood's keys reset.
func TestRefusalEndsWhenStateResets(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxBytes(2560))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute})
	flood(t, clock, login, "user-", 64)
	r, err := login.Allow(context.Background(), "late")
	if err != nil || r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
		t.Fatalf("new key on a full store: %+v %v, want denied with a RetryAfter of at most a minute", r, err)
	}
	if st := s.Stats(); st.ColdSlots != 0 || st.Refused == 0 {
		t.Fatalf("stats %+v: want no compact part and refusals", st)
	}
	clock.Advance(r.RetryAfter)
	// Insertions sweep a few expired keys each: a handful of tries finds room.
	admitted := flood(t, clock, login, "later-", 64)
	if admitted == 0 {
		t.Fatalf("no new key admitted after the RetryAfter of %v", r.RetryAfter)
	}
}

// Long keys: the byte budget, not the key count, bounds the store.
func TestMaxBytesBoundsLongKeys(t *testing.T) {
	const maxBytes = 4 << 20
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxBytes(maxBytes))
	l := mustLimiter(t, s, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Hour})
	long := strings.Repeat("x", 1000)
	if admitted := flood(t, clock, l, long, 20_000); admitted != 20_000 {
		t.Fatalf("%d of 20000 admitted, want all (each key is safe to drop)", admitted)
	}
	st := s.Stats()
	// Each key is charged twice its 1,000 bytes and an overhead: a single
	// policy fills 7/8 of the exact part's half of the budget, about 800 keys.
	const exact = maxBytes / 2
	if st.Bytes > maxBytes || st.Keys > exact/2000 || st.Keys < exact/2300*7/10 {
		t.Fatalf("stats %+v: want at most %d bytes and close to %d keys", st, maxBytes, exact/2300*7/8)
	}
	if st.Evicted == 0 || st.Refused != 0 || st.Spilled != 0 {
		t.Fatalf("stats %+v: want evictions and no refusal or spill", st)
	}
}

// A sliding log cannot outgrow the byte budget: when its buffer cannot grow,
// the log moves to the compact part as one entry of its sum at its newest
// entry's time, which holds its units longer than the log would, never
// shorter. So it admits what its limit allows, never more than a store with
// room for the whole log, and stays within the budget.
func TestMaxBytesBoundsALog(t *testing.T) {
	const maxBytes = 64 << 10
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxBytes(maxBytes))
	p := sluice.Policy{Name: "log", Algorithm: sluice.SlidingLog, Limit: 10_000, Period: time.Hour}
	l := mustLimiter(t, s, p)
	roomy := mustLimiter(t, memory.New(memory.WithClock(clock)), p)
	ctx := context.Background()
	var count tally
	send := func(i int) {
		got, err := l.Allow(ctx, "k")
		want, _ := roomy.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		count.add(t, got, want, fmt.Sprintf("request %d, against a store with room for the log", i))
		if st := s.Stats(); i%100 == 0 && st.Bytes > maxBytes {
			t.Fatalf("request %d: stats %+v, over the budget", i, st)
		}
	}
	for i := range 10_000 { // the whole limit, a millisecond apart
		send(i)
		clock.Advance(time.Millisecond)
	}
	if count.got != 10_000 {
		t.Fatalf("%d of 10,000 admitted within the limit", count.got)
	}
	for i := range 3 * 3600 { // then one a second for three hours
		send(10_000 + i)
		clock.Advance(time.Second)
	}
	st := s.Stats()
	if st.Spilled != 0 || st.ColdKeys == 0 || st.Refused != 0 {
		t.Fatalf("stats %+v: want the log moved to the compact part, none refused", st)
	}
	t.Logf("%d admitted, %d with room for the log; stats %+v", count.got, count.want, st)
}

// An all-or-nothing check on a full store admits new keys too (kept in the
// compact part) and, when one check is denied, consumes nothing on any.
func TestAllowAllOnAFullStore(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(attackMaxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute})
	flood(t, clock, login, "user-", 2*attackMaxKeys)
	ctx := context.Background()
	check := func(key string, cost int64) sluice.Check { return sluice.Check{Limiter: login, Key: key, Cost: cost} }
	before := s.Stats()
	results, err := sluice.AllowAll(ctx, check("user-1", 1), check("new-one", 1), check("new-two", 2))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if !r.Allowed {
			t.Fatalf("check %d: %+v, want admitted", i, r)
		}
	}
	if after := s.Stats(); after.Spilled != before.Spilled+2 || after.Refused != 0 {
		t.Fatalf("stats before %+v, after %+v: want the two new keys spilled, none refused", before, after)
	}
	// new-two has 3 left: a batch asking 4 of it is denied, and charges
	// neither new-one nor user-1.
	if results, _ = sluice.AllowAll(ctx, check("user-1", 1), check("new-one", 1), check("new-two", 4)); results[0].Allowed {
		t.Fatalf("batch over new-two's limit: %+v, want denied", results)
	}
	for key, want := range map[string]int64{"user-1": 3, "new-one": 4, "new-two": 3} {
		if r, _ := login.AllowN(ctx, key, 0); r.Remaining != want {
			t.Fatalf("%s after the batches: %+v, want %d remaining", key, r, want)
		}
	}
}
