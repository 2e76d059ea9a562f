package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// TestLeaseSizes: a key is leased once a lease is expected to admit two
// requests after the one reserving it (three requests within a TTL); a
// lease holds no more than the key is expected to use: while the key has
// been seen for less than a TTL, at most what it asked for so far (its
// first lease its rate over a TTL but at most that, the next ones the rate
// the lease before was spent at, at most that); then one TTL at that rate;
// a key that goes cold is decided by one store call per request again.
func TestLeaseSizes(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	// B·T = 1s, so the TTL is 50ms and the max lease (100,000) caps nothing here.
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1_000_000, Period: time.Second}
	s := lease.New(newMemory(clock), lease.WithClock(clock))
	if ttl := s.TTL(&p); ttl != 50*time.Millisecond {
		t.Fatalf("TTL %v, want 50ms", ttl)
	}
	ctx := context.Background()
	decide := func(at time.Duration) {
		t.Helper()
		clock.Set(storetest.Epoch.Add(at))
		if res, err := s.Decide(ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}); err != nil || !res.Allowed {
			t.Fatalf("at %v: %+v, %v", at, res, err)
		}
	}
	held := func(want int64, what string) {
		t.Helper()
		if got := s.Held(&p, "k"); got != want {
			t.Errorf("%s: holds %d units, want %d", what, got, want)
		}
	}
	// One request every 5ms: ten per TTL.
	decide(0)
	decide(5 * time.Millisecond)
	held(0, "two requests: too cold to lease")
	if st := s.Stats(); st.Direct != 2 || st.StoreCalls != 2 || st.Leases != 0 {
		t.Errorf("two requests: %+v, want both sent as they came and no lease", st)
		return
	}
	// Three units in 10ms are 15 per TTL, but at most the three it asked for.
	decide(10 * time.Millisecond)
	held(2, "first lease")
	decide(15 * time.Millisecond)
	decide(20 * time.Millisecond)
	held(0, "first lease spent")
	// Three units spent in the 15ms since it was reserved: 10 per TTL, but
	// at most the six it asked for in the 25ms it has been seen.
	decide(25 * time.Millisecond)
	held(5, "second lease")
	for at := 30 * time.Millisecond; at <= 50*time.Millisecond; at += 5 * time.Millisecond {
		decide(at)
	}
	held(0, "second lease spent")
	// Six units spent in the 30ms since it was reserved: 10 per TTL, and the
	// key has been seen for longer than a TTL.
	decide(55 * time.Millisecond)
	held(9, "third lease")
	// A lease that outlives the key's requests: its TTL ends with units left,
	// which are not given back (the bucket refilled them long since: a
	// release would cost a call for nothing).
	decide(60 * time.Millisecond)
	clock.Set(storetest.Epoch.Add(200 * time.Millisecond))
	held(0, "third lease, expired")
	decide(200 * time.Millisecond)
	if st := s.Stats(); st.StoreCalls != 6 || st.Releases != 0 {
		t.Errorf("%d store calls (%d releases), want 6: two sent as they came, one per lease, and one for the key gone cold", st.StoreCalls, st.Releases)
	}
}
