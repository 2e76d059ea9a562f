package failover_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestShardKilledPartialCharges measures what an all-or-nothing set across
// shards leaves charged when one of its shards is SIGKILLed under load (see
// docs/operations.md, "Attacks and worst cases"). Every set has one key on
// each of three shards, a key of its own; after the run each surviving key is
// peeked. An admitted set charged each of its keys exactly once; a set that
// failed (the fail policy denied it) may leave charges — the reservation
// whose call failed, if Redis applied it before its answer was lost, and
// reservations whose refund could not reach Redis — but at most its own cost
// on the surviving shards, and never an admission.
func TestShardKilledPartialCharges(t *testing.T) {
	t.Parallel()
	servers := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	rs := openRedis(t, servers[0].URL()+"?shard="+servers[1].URL()+"&shard="+servers[2].URL())
	// A generous timeout: the test needs sets in flight when the shard dies,
	// not a fast warm-up; with chaosTimeout (50 ms) a loaded machine timed
	// healthy calls out, opened every breaker, and no set was admitted.
	fs := failover.New(rs, failover.WithMode(failover.FailClosed), failover.WithTimeout(2*time.Second),
		failover.WithBreakerPerNode(func(r sluice.Request) string { return rs.NodeOf(r.Policy, r.Key) }),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: chaosFailures, Cooldown: chaosCooldown}))
	const limit = 1 << 20
	p := &sluice.Policy{Name: "partial", Algorithm: sluice.FixedWindow, Limit: limit, Period: 1000 * time.Hour}

	// keysFor returns a set's three keys, one on each shard.
	var next atomic.Int64
	keysFor := func() [3]string {
		var keys [3]string
		for found := 0; found < 3; {
			k := fmt.Sprint("s", next.Add(1))
			if sh := rs.ShardOf(p, k); keys[sh] == "" {
				keys[sh] = k
				found++
			}
		}
		return keys
	}
	type set struct {
		keys     [3]string
		admitted bool
		err      error
	}
	var mu sync.Mutex
	var sets []set
	var admittedBefore atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				keys := keysFor()
				reqs := make([]sluice.Request, 3)
				for i, k := range keys {
					reqs[i] = sluice.Request{Policy: p, Key: k, Cost: 1}
				}
				res := make([]sluice.Result, 3)
				err := fs.DecideAll(ctx, reqs, res)
				mu.Lock()
				sets = append(sets, set{keys: keys, admitted: err == nil && res[0].Allowed, err: err})
				if err == nil {
					admittedBefore.Add(1)
				}
				mu.Unlock()
			}
		})
	}
	// Kill one shard once the load runs: sets in flight then fail part way.
	if !testwait.For(testwait.Timeout, func() bool { return admittedBefore.Load() >= 50 }) {
		stop.Store(true)
		wg.Wait()
		t.Fatalf("fewer than 50 sets admitted in %v before the kill", testwait.Timeout)
	}
	servers[1].Kill()
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()

	charged := func(key string) int64 {
		r, err := rs.Decide(ctx, sluice.Request{Policy: p, Key: key, Cost: 0})
		if err != nil {
			t.Fatalf("peek %s: %v", key, err)
		}
		return limit - r.Remaining
	}
	var admitted, failed, kept, partial, units int
	for _, s := range sets {
		if errors.Is(s.err, failover.ErrBreakerOpen) {
			kept++ // no call was made: nothing to charge
			continue
		}
		var got int64
		for sh, k := range s.keys {
			if sh == 1 {
				continue // the killed shard
			}
			c := charged(k)
			got += c
			if c > 1 {
				t.Errorf("key %s was charged %d times by one set", k, c)
			}
		}
		switch {
		case s.admitted:
			admitted++
			if got != 2 {
				t.Errorf("an admitted set charged its surviving keys %d units, want 2", got)
			}
		case s.err != nil:
			failed++
			if got > 0 {
				partial++
				units += int(got)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no set failed: the kill did not reach the load")
	}
	t.Logf("%d sets: %d admitted, %d kept from Redis by an open breaker, %d failed in their calls; %d of these left %d units charged on the surviving shards (bound: 2 per failed set)",
		len(sets), admitted, kept, failed, partial, units)
}
