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

// floodCase is a flood of new keys on a store full of keys it may not forget.
type floodCase struct {
	name string
	opts []memory.Option
}

var floodCases = []floodCase{
	{"max_keys=4096", []memory.Option{memory.WithMaxKeys(4096)}},
	{"max_bytes=1MiB", []memory.Option{memory.WithMaxBytes(1 << 20)}},
}

// A flood of new keys, each used once, of ten times what the exact part
// holds does not lock new users out: at least 98% of new keys then get
// exactly the decisions (every Result field) they would get on an empty
// store, for a whole limit and the denial after it, and none is ever admitted
// more than there. Keys used up before the flood, and the new users who use
// theirs up, stay denied, also after a second flood that overflows the
// compact part; the store stays within its byte budget throughout.
func TestFloodOfNewKeysLeavesNewUsersTheirLimit(t *testing.T) {
	for _, fc := range floodCases {
		for _, a := range sluice.Algorithms {
			t.Run(fc.name+"/"+string(a), func(t *testing.T) { testFlood(t, fc, a) })
		}
	}
}

const (
	floodVictims = 64
	// floodMinimum is the share of new users who must get the empty store's
	// decisions. Which of them find room in the exact part depends on how the
	// store's random hash seed spreads keys over its shards: with max_bytes
	// and the sliding log (whose entries need room there) 40 seeds gave
	// 99.4–100%, and one 98.95%.
	floodMinimum = 0.98
)

func testFlood(t *testing.T, fc floodCase, a sluice.Algorithm) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(append([]memory.Option{memory.WithClock(clock)}, fc.opts...)...)
	p := sluice.Policy{Name: "login", Algorithm: a, Limit: 5, Period: 15 * time.Minute}
	l := mustLimiter(t, s, p)
	ctx := context.Background()
	checkBytes := func(when string) {
		t.Helper()
		if st := s.Stats(); st.Bytes > st.MaxBytes {
			t.Fatalf("%s: %d bytes charged, over the budget of %d: %+v", when, st.Bytes, st.MaxBytes, st)
		}
	}

	for i := range floodVictims {
		exhaust(t, l, "victim-"+strconv.Itoa(i))
	}
	// The flood: a new key per request, 100µs apart (nothing resets during
	// it), until it has sent ten times what the exact part holds, full.
	capacity, sent := 0, 0
	for sent < 10*capacity || capacity == 0 {
		if r, err := l.Allow(ctx, "flood-"+strconv.Itoa(sent)); err != nil || !r.Allowed {
			t.Fatalf("flood key %d: %+v %v", sent, r, err)
		}
		sent++
		clock.Advance(100 * time.Microsecond)
		if st := s.Stats(); sent%256 == 0 && st.Spilled > 0 {
			capacity = st.Keys
		}
	}
	checkBytes("after the flood")
	afterFlood := s.Stats()

	// New users, half as many as the exact part holds (a sliding log of
	// several entries needs room there).
	floodUsers := capacity / 2
	exact, allowedAlike, admitted, lockedOut := newUsers(t, clock, l, p, "user-", floodUsers)
	t.Logf("exact part held %d keys; flood of %d new keys; stats %+v", capacity, sent, afterFlood)
	t.Logf("%d of %d new users got every Result an empty store gives, %d every Allowed; %.3f of their admissions; %d locked out",
		exact, floodUsers, allowedAlike, admitted, lockedOut)
	if float64(exact) < floodMinimum*float64(floodUsers) {
		t.Errorf("only %d of %d new users got the empty store's decisions, want at least %.0f%%", exact, floodUsers, 100*floodMinimum)
	}

	// A second flood as large: the compact part overflows into its floors,
	// which only ever count more.
	for i := range sent {
		if _, err := l.Allow(ctx, "second-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Microsecond)
	}
	checkBytes("after the second flood")
	for i := range floodVictims {
		if r, _ := l.Allow(ctx, "victim-"+strconv.Itoa(i)); r.Allowed {
			t.Fatalf("victim %d, used up before the floods, admitted after them: %+v", i, r)
		}
	}
	for i := range floodUsers {
		if r, _ := l.Allow(ctx, "user-"+strconv.Itoa(i)); r.Allowed {
			t.Fatalf("user %d, used up between the floods, admitted after the second: %+v", i, r)
		}
	}
	// Past what the compact part holds, new users are over-counted where
	// their buckets overflowed, never admitted more: how many still get the
	// empty store's decisions is the bound docs/operations.md gives.
	exact, allowedAlike, admitted, lockedOut = newUsers(t, clock, l, p, "late-", floodUsers)
	t.Logf("after a second flood of %d keys: %+v", sent, s.Stats())
	t.Logf("then %d of %d new users got every Result an empty store gives, %d every Allowed; %.3f of their admissions; %d locked out",
		exact, floodUsers, allowedAlike, admitted, lockedOut)
	if lockedOut > 0 {
		t.Errorf("%d of %d new users locked out after the second flood: the floors hold the flood's one unit a key, no more", lockedOut, floodUsers)
	}

	// Once the floods' keys have reset, so has the compact part: new users
	// get their whole limit again.
	clock.Advance(2 * p.Period)
	if exact, _, _, _ = newUsers(t, clock, l, p, "after-", floodUsers); float64(exact) < floodMinimum*float64(floodUsers) {
		t.Errorf("after the floods reset, only %d of %d new users got the empty store's decisions", exact, floodUsers)
	}
}

// newUsers sends n new keys their whole limit, 1ms apart, and one request
// more, checking that none is admitted more often than on an empty store
// (which, on the same clock, says what each should get). It returns how many
// got every Result the empty store gives, how many every Allowed, what
// share of the empty store's admissions they got, and how many got none.
func newUsers(t *testing.T, clock *storetest.Clock, l *sluice.Limiter, p sluice.Policy, prefix string, n int) (exact, allowedAlike int, share float64, lockedOut int) {
	t.Helper()
	ctx := context.Background()
	var admissions, wanted int
	for i := range n {
		key := prefix + strconv.Itoa(i)
		empty := mustLimiter(t, memory.New(memory.WithClock(clock)), p)
		same, sameAllowed := true, true
		var count tally
		for range p.Limit + 1 {
			got, err := l.Allow(ctx, key)
			want, _ := empty.Allow(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			count.add(t, got, want, key+", against an empty store")
			same = same && got == want
			sameAllowed = sameAllowed && got.Allowed == want.Allowed
			clock.Advance(time.Millisecond)
		}
		if same {
			exact++
		}
		if sameAllowed {
			allowedAlike++
		}
		if count.got == 0 {
			lockedOut++
		}
		admissions, wanted = admissions+count.got, wanted+count.want
	}
	return exact, allowedAlike, float64(admissions) / float64(wanted), lockedOut
}

// tally counts the admissions of a store under test (got) and of one it may
// never admit more than (want).
type tally struct{ got, want int }

// add counts a pair of results and fails the test once got has admitted more.
func (c *tally) add(t *testing.T, got, want sluice.Result, what string) {
	t.Helper()
	if got.Allowed {
		c.got++
	}
	if want.Allowed {
		c.want++
	}
	if c.got > c.want {
		t.Fatalf("%s: admitted %d times where the other admits %d: got %+v, want %+v", what, c.got, c.want, got, want)
	}
}

// numbered returns n keys: prefix followed by 0 to n-1.
func numbered(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

// Past what the compact part holds, a flood of keys each used up folds whole
// limits into its floors: the new keys whose buckets hold one are denied
// until those reset (the attack costs a limit's worth of requests per key);
// no flooded key is ever admitted again before its reset.
func TestFloodOfUsedUpKeysPastTheCompactPart(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(1024))
	p := sluice.Policy{Name: "login", Algorithm: sluice.FixedWindow, Limit: 5, Period: 15 * time.Minute}
	l := mustLimiter(t, s, p)
	ctx := context.Background()
	slots := s.Stats().ColdSlots
	flooded := 2 * slots
	denied := 0 // once floors hold whole limits, some flood keys are denied too
	for i := range flooded {
		for range p.Limit {
			if r, _ := l.Allow(ctx, "used-"+strconv.Itoa(i)); !r.Allowed {
				denied++
			}
		}
		clock.Advance(10 * time.Microsecond)
	}
	st := s.Stats()
	if st.Folded == 0 || st.Bytes > st.MaxBytes {
		t.Fatalf("stats %+v: want states folded, within the bytes", st)
	}
	exact, allowedAlike, share, lockedOut := newUsers(t, clock, l, p, "new-", 1000)
	t.Logf("%d keys used up (%d of their requests denied), %d compact slots; stats %+v", flooded, denied, slots, st)
	t.Logf("then %d of 1000 new users got every Result an empty store gives, %d every Allowed; %.3f of their admissions; %d locked out",
		exact, allowedAlike, share, lockedOut)
	for i := range flooded {
		if r, _ := l.Allow(ctx, "used-"+strconv.Itoa(i)); r.Allowed {
			t.Fatalf("used-up key %d admitted before its reset: %+v", i, r)
		}
	}
}
