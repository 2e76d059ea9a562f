package memory_test

import (
	"context"
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
// safe to drop than Alice's, so once the store is full the attacker's new keys
// are denied — counted in Stats — and Alice stays denied.
func TestRotationOnTheSamePolicyIsDenied(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(attackMaxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.SlidingLog, Limit: 5, Period: 15 * time.Minute})
	exhaust(t, login, "alice")

	admitted := flood(t, clock, login, "user-", attackKeys)
	if admitted > attackMaxKeys {
		t.Fatalf("%d attacker keys admitted with room for %d", admitted, attackMaxKeys)
	}
	if r, _ := login.Allow(context.Background(), "alice"); r.Allowed {
		t.Fatalf("Alice admitted after the flood: %+v", r)
	}
	st := s.Stats()
	if st.Keys > attackMaxKeys || st.Refused != uint64(attackKeys-admitted) || st.Evicted != 0 {
		t.Fatalf("stats %+v: want at most %d keys, %d refused, none evicted", st, attackMaxKeys, attackKeys-admitted)
	}
	t.Logf("%d of %d flood keys admitted; stats %+v", admitted, attackKeys, st)
}

// A flood of one policy's keys that may not be dropped leaves room for another
// policy's new keys: a policy at its share of the store fills at most 7/8 of
// each shard.
func TestFloodLeavesRoomForOtherPolicies(t *testing.T) {
	// Shards of 1,024 keys, so the eighth kept in each (128) is far above the
	// 64 or so of the other policy's new keys that hashing puts in any shard.
	const maxKeys, others = 1 << 16, 1 << 12
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(maxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.SlidingLog, Limit: 5, Period: 15 * time.Minute})
	api := mustLimiter(t, s, sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour})
	if admitted := flood(t, clock, login, "user-", 2*maxKeys); admitted > maxKeys*7/8 {
		t.Fatalf("the flood got %d keys stored, more than 7/8 of %d", admitted, maxKeys)
	}
	if admitted := flood(t, clock, api, "client-", others); admitted != others {
		t.Fatalf("only %d of %d new keys of another policy admitted after the flood", admitted, others)
	}
}

// A denial caused by the store having no room is a decision, not an error,
// and stays one as the flood goes on; once the flood's keys reset, new keys
// are admitted again.
func TestRefusalEndsWhenStateResets(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(attackMaxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute})
	flood(t, clock, login, "user-", 2*attackMaxKeys)
	r, err := login.Allow(context.Background(), "late")
	if err != nil || r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
		t.Fatalf("new key on a full store: %+v %v, want denied with a RetryAfter of at most a minute", r, err)
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
	// policy fills 7/8 of the budget, about 1,600 keys.
	if st.Bytes > maxBytes || st.Keys > maxBytes/2000 || st.Keys < maxBytes/2300*7/10 {
		t.Fatalf("stats %+v: want at most %d bytes and close to %d keys", st, maxBytes, maxBytes/2300*7/8)
	}
	if st.Evicted == 0 || st.Refused != 0 {
		t.Fatalf("stats %+v: want evictions and no refusal", st)
	}
}

// A sliding log cannot outgrow the byte budget: when its buffer cannot grow,
// the request is denied, never admitted uncounted.
func TestMaxBytesBoundsALog(t *testing.T) {
	const maxBytes = 64 << 10
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxBytes(maxBytes))
	l := mustLimiter(t, s, sluice.Policy{Name: "log", Algorithm: sluice.SlidingLog, Limit: 10_000, Period: time.Hour})
	ctx := context.Background()
	admitted := 0
	for range 10_000 {
		r, err := l.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
		clock.Advance(time.Millisecond)
	}
	st := s.Stats()
	if st.Bytes > maxBytes || st.Refused == 0 || admitted == 10_000 || admitted < 256 {
		t.Fatalf("%d admitted, stats %+v: want the log capped within %d bytes and the rest refused", admitted, st, maxBytes)
	}
	t.Logf("%d admitted, stats %+v", admitted, st)
}

// An all-or-nothing check that needs a new key the store has no room for is
// denied as a whole, and stores nothing.
func TestAllowAllRefusedWhenFull(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(attackMaxKeys))
	login := mustLimiter(t, s, sluice.Policy{Name: "login_attempts", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute})
	flood(t, clock, login, "user-", 2*attackMaxKeys)
	before := s.Stats()
	results, err := sluice.AllowAll(context.Background(),
		sluice.Check{Limiter: login, Key: "user-1", Cost: 1}, // held: admissible alone
		sluice.Check{Limiter: login, Key: "new-one", Cost: 1},
		sluice.Check{Limiter: login, Key: "new-two", Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.Allowed || r.RetryAfter <= 0 {
			t.Fatalf("check %d: %+v, want denied with a RetryAfter", i, r)
		}
	}
	after := s.Stats()
	if after.Keys != before.Keys || after.Refused != before.Refused+1 {
		t.Fatalf("stats before %+v, after %+v: want nothing stored and one refusal", before, after)
	}
	if r, _ := login.AllowN(context.Background(), "user-1", 0); r.Remaining != 4 {
		t.Fatalf("user-1 after the refused batch: %+v, want 4 remaining (nothing consumed)", r)
	}
}
