package failover_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// While the primary is down, the local store resists key rotation like the
// memory store it is: a flood of new keys on another policy does not give
// Alice back her login attempts, and neither does a flood on her own policy,
// whose new keys are admitted and kept in the store's compact part.
func TestFailLocalResistsKeyRotation(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	local := memory.New(memory.WithClock(clock), memory.WithMaxKeys(4096))
	s := failover.New(p, failover.WithMode(failover.FailLocal), failover.WithLocal(local),
		failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, FailureRate: 1, Cooldown: time.Hour}))
	p.down.Store(true)
	login := &sluice.Policy{Name: "login_attempts", Algorithm: sluice.SlidingLog, Limit: 5, Period: 15 * time.Minute}
	signup := &sluice.Policy{Name: "signup", Algorithm: sluice.SlidingLog, Limit: 100, Period: time.Hour}
	decide := func(pol *sluice.Policy, key string) sluice.Result {
		t.Helper()
		r, err := s.Decide(ctx, sluice.Request{Policy: pol, Key: key, Cost: 1})
		if err != nil || !r.Degraded {
			t.Fatalf("%s/%s: %+v %v, want a local decision", pol.Name, key, r, err)
		}
		return r
	}
	for range 5 {
		decide(login, "alice")
	}
	if decide(login, "alice").Allowed {
		t.Fatal("sixth attempt admitted")
	}
	admitted := 0
	for i := range 60_000 {
		if decide(signup, "attacker-"+strconv.Itoa(i)).Allowed {
			admitted++
		}
		if decide(login, "user-"+strconv.Itoa(i)).Allowed {
			admitted++
		}
		clock.Advance(100 * time.Microsecond)
	}
	if r := decide(login, "alice"); r.Allowed {
		t.Fatalf("after 120,000 rotated keys Alice got %+v: her attempts were forgotten", r)
	}
	if st := local.Stats(); st.Keys > 4096 || st.Spilled == 0 || st.Refused != 0 {
		t.Fatalf("local store stats %+v: want at most 4096 exact keys, the login flood kept in the compact part, none refused", st)
	}
	if admitted != 120_000 {
		t.Fatalf("%d of 120,000 new keys admitted, want all: each is within its limit", admitted)
	}
}
