package failover_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/redisstore"
)

// TestChaosClusterFailover kills a master of a Redis Cluster (3 masters, 1
// replica each, cluster-node-timeout 1000 ms) under load: its replica is
// promoted, and decisions on keys in the master's slots, denied during the
// gap (FailClosed), are decided by the new master within 15 s of the kill.
//
// The store has a breaker per master, as serve wires it. A second store with
// one breaker, under the same load on the same Cluster at the same time, is
// the baseline: the dead master's failures open its breaker for every key.
// With cluster-require-full-coverage no, decisions on the keys of the
// healthy masters stay Redis' during the gap; with Redis' default (yes),
// every master refuses every key (CLUSTERDOWN) from the moment the dead one
// is marked failed until its replica is promoted, which no breaker can help.
func TestChaosClusterFailover(t *testing.T) {
	t.Parallel()
	t.Run("full_coverage", func(t *testing.T) { clusterFailover(t, true) })
	t.Run("partial_coverage", func(t *testing.T) { clusterFailover(t, false) })
}

func clusterFailover(t *testing.T, fullCoverage bool) {
	coverage := "yes"
	if !fullCoverage {
		coverage = "no"
	}
	c := redistest.StartCluster(t, 3, 1, redistest.WithArgs("--cluster-require-full-coverage", coverage))
	m := startStallMeter(t)
	rs := openRedis(t, c.URL())
	var bl breakerLog
	// The default window of 20 calls, as in production: with the chaos
	// tests' 3, two healthy calls missing the 50 ms timeout on a loaded
	// machine open their master's breaker, which is not what is measured.
	window := failover.WithBreaker(failover.BreakerSettings{MinCalls: failover.DefaultMinCalls, Cooldown: chaosCooldown})
	// A timeout of 500 ms, not chaosTimeout: what is measured is which
	// breaker a dead master opens, and on a machine loaded enough healthy
	// calls missed 50 ms so often that their masters' breakers opened too
	// (40.8% of the healthy masters' decisions by Redis in one run). A call to
	// the dead master fails at once (connection refused) either way.
	timeout := failover.WithTimeout(500 * time.Millisecond)
	fs := newChaosStore(rs, failover.FailClosed, &bl, window, timeout,
		failover.WithBreakerPerNode(func(r sluice.Request) string { return rs.NodeOf(r.Policy, r.Key) }))
	base := newChaosStore(openRedis(t, c.URL()), failover.FailClosed, &breakerLog{}, window, timeout)
	slotOf := func(key string) int { return redisstore.Slot(rs.Key(chaosPolicy, key)) }

	nodes := clusterNodes(t, c)
	victim, ok := slotOwner(nodes, slotOf("v0"))
	if !ok {
		t.Fatalf("no master serves the slot of v0: %+v", nodes)
	}
	var replica clusterNode
	for _, n := range nodes {
		if n.master == victim.id {
			replica = n
		}
	}
	if replica.id == "" {
		t.Fatalf("master %d has no replica: %+v", victim.port, nodes)
	}
	// Four keys in the victim's slots (workers 0-3 of each store's eight),
	// four elsewhere.
	var keys, others []string
	for i := 0; len(keys) < 4 || len(others) < 4; i++ {
		if i > 10000 {
			t.Fatal("could not find keys on every master")
		}
		k := fmt.Sprintf("v%d", i)
		switch owner, _ := slotOwner(nodes, slotOf(k)); {
		case owner.id == victim.id && len(keys) < 4:
			keys = append(keys, k)
		case owner.id != victim.id && len(others) < 4:
			others = append(others, k)
		}
	}
	keys = append(keys, others...)
	onVictim := func(k int) bool { return k < 4 }
	for _, k := range keys {
		waitDecided(t, fs, k)
		waitDecided(t, base, k)
	}
	if got := rs.NodeOf(chaosPolicy, keys[0]); got != serverOn(t, c, victim.port).Addr() {
		t.Fatalf("NodeOf(%s) = %q before the kill, want the victim %s", keys[0], got, serverOn(t, c, victim.port).Addr())
	}

	l := startLoad(t, fs, chaosWorkers/2, keys...)
	lb := startLoad(t, base, chaosWorkers/2, keys...)
	if !l.waitRedis(time.Now(), testwait.Timeout, false, nil) || !lb.waitRedis(time.Now(), testwait.Timeout, false, nil) {
		t.Fatalf("no call was decided by Redis in the %v after the load started", testwait.Timeout)
	}
	time.Sleep(200 * time.Millisecond)
	killing := time.Now()
	serverOn(t, c, victim.port).Kill()
	dead := time.Now()
	// A set over keys on the dead master and a live one fails, naming the
	// dead master (long before its replica can be promoted).
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	set := []sluice.Request{{Policy: chaosPolicy, Key: keys[0], Cost: 1}, {Policy: chaosPolicy, Key: keys[4], Cost: 1}}
	err := rs.DecideAll(ctx, set, make([]sluice.Result, len(set)))
	cancel()
	var ne *redisstore.NodeError
	if !errors.As(err, &ne) || ne.FailedNode() != serverOn(t, c, victim.port).Addr() {
		t.Errorf("a set over the dead master's key and a live one: %v; want an error naming %s", err, serverOn(t, c, victim.port).Addr())
	}

	// Wait for the replica to be the master of the victim's slots.
	var promoted time.Time
	if !testwait.For(testwait.Timeout, func() bool {
		owner, ok := slotOwner(clusterNodes(t, c), slotOf(keys[0]))
		return ok && owner.id == replica.id
	}) {
		for _, srv := range c.Nodes {
			out, err := srv.Do("CLUSTER", "NODES")
			t.Logf("CLUSTER NODES on %s: %v\n%s", srv.Addr(), err, out)
		}
		t.Fatalf("replica %d was not promoted within 30 s of killing master %d", replica.port, victim.port)
	}
	promoted = time.Now()
	l.waitRedis(dead, testwait.Timeout, true, onVictim) // checked on the records
	time.Sleep(300 * time.Millisecond)
	calls, baseCalls := l.halt(), lb.halt()

	raw, active := checkCalls(t, m, failover.FailClosed, calls)
	onVictimCall := func(c chaosCall) bool { return onVictim(c.key) }
	gap := count(calls, func(c chaosCall) bool { return onVictimCall(c) && within(dead, promoted)(c) })
	otherGap := count(calls, func(c chaosCall) bool { return !onVictimCall(c) && within(dead, promoted)(c) })
	baseOtherGap := count(baseCalls, func(c chaosCall) bool { return !onVictimCall(c) && within(dead, promoted)(c) })
	t.Logf("master %d killed; replica %d seen as master of its slots %v later (%v not counting stalls)", victim.port, replica.port,
		promoted.Sub(killing).Round(time.Millisecond), m.active(killing, promoted).Round(time.Millisecond))
	t.Logf("until then, on its keys: %v; on the other masters' keys: %v", gap, otherGap)
	share := func(tl tally) float64 { return 100 * float64(tl.redis) / float64(max(1, tl.n)) }
	t.Logf("decisions on the healthy masters' keys made by Redis from the kill to the promotion: %.1f%% of %d with a breaker per master, %.1f%% of %d with one breaker",
		share(otherGap), otherGap.n, share(baseOtherGap), baseOtherGap.n)
	t.Logf("denials by cause:%s", causes(calls))
	switch {
	case otherGap.n == 0:
		t.Error("no decision on the healthy masters' keys between the kill and the promotion")
	case !fullCoverage && share(otherGap)+5 < share(baseOtherGap):
		// Under full coverage the healthy masters answer CLUSTERDOWN until
		// the promotion whatever the client does, so the two shares are
		// Redis' alike (32.9% and 33.1% in one run): only logged there.
		// Five points of slack: when the one breaker happens to stay closed,
		// the two shares are equal but for noise (97.1% and 98.2% in a run).
		t.Errorf("a breaker per master made fewer of the healthy masters' decisions Redis' than one breaker")
	case !fullCoverage && share(otherGap) < 90:
		// 99.3-99.7% in four runs: the rest are healthy calls that missed
		// the 50 ms timeout on a loaded machine.
		t.Errorf("with a breaker per master only %.1f%% of the healthy masters' decisions were Redis' during the fail-over", share(otherGap))
	}
	if gap.degraded == 0 {
		t.Errorf("no call on the killed master's keys was denied between the kill and the promotion: %v", gap)
	}
	if at := bl.opened(killing); at.IsZero() {
		t.Error("the breaker did not open after the kill")
	}
	first, all, ok := backToRedis(calls, dead, onVictim)
	if !ok {
		t.Fatalf("some worker on the killed master's keys was never decided by Redis again (first: %v)", first)
	}
	failoverTime := m.active(killing, all)
	t.Logf("after the kill, first decision by the new master %v, every worker's on its keys %v (%v not counting stalls); slowest call %v (%v not counting stalls); longest stall %v",
		first.Sub(killing).Round(time.Millisecond), all.Sub(killing).Round(time.Millisecond), failoverTime.Round(time.Millisecond),
		raw.Round(time.Millisecond), active.Round(time.Millisecond), m.worst().Round(time.Millisecond))
	if failoverTime > 15*time.Second {
		t.Errorf("decisions on the killed master's keys resumed %v after the kill (%v not counting stalls), want <= 15 s", all.Sub(killing), failoverTime)
	}

	// The state of a key decided now lives on the promoted replica.
	now := clusterNodes(t, c)
	fresh := ""
	for i := 0; fresh == ""; i++ {
		if o, _ := slotOwner(now, slotOf(fmt.Sprintf("after%d", i))); o.id == replica.id {
			fresh = fmt.Sprintf("after%d", i)
		} else if i > 10000 {
			t.Fatalf("no slot is served by the promoted replica: %+v", now)
		}
	}
	r := waitDecided(t, fs, fresh)
	if got := mustDo(t, serverOn(t, c, replica.port), "EXISTS", rs.Key(chaosPolicy, fresh)); got != "1" {
		t.Errorf("a decision after the fail-over (%+v) left no state on the new master (EXISTS = %s)", r, got)
	}
	// The store's slot map moved the slots to the new master.
	if !testwait.For(testwait.Timeout, func() bool { return rs.NodeOf(chaosPolicy, fresh) == serverOn(t, c, replica.port).Addr() }) {
		t.Errorf("NodeOf(%s) = %q long after the promotion, want the new master %s", fresh, rs.NodeOf(chaosPolicy, fresh), serverOn(t, c, replica.port).Addr())
	}
}
