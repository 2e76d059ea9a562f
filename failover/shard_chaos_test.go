package failover_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestShardKilled: one of three shards of a sharded store is SIGKILLed under
// load. With a breaker per shard, decisions for keys on the two healthy
// shards stay Redis' (not degraded) while the dead shard's keys go to the
// fail policy; with one breaker for the store (the baseline, measured in
// the same run) the dead shard's failures open it for every key.
func TestShardKilled(t *testing.T) {
	perNode := shardKilled(t, true)
	oneBreaker := shardKilled(t, false)
	t.Logf("healthy-shard decisions not degraded: %.1f%% of %d with a breaker per shard, %.1f%% of %d with one breaker",
		100*perNode.healthyShare(), perNode.healthy, 100*oneBreaker.healthyShare(), oneBreaker.healthy)
	t.Logf("dead-shard decisions degraded: %.1f%% of %d (per shard), %.1f%% of %d (one breaker)",
		100*perNode.deadShare(), perNode.dead, 100*oneBreaker.deadShare(), oneBreaker.dead)
	if s := perNode.healthyShare(); s < 0.99 {
		t.Errorf("with a breaker per shard only %.1f%% of the healthy shards' decisions were Redis'", 100*s)
	}
	if s := perNode.deadShare(); s < 1 {
		t.Errorf("%.1f%% of the dead shard's decisions were not degraded", 100*s)
	}
}

type shardTally struct {
	healthy, healthyOK int // decisions on keys of live shards; of them by Redis
	dead, deadDegraded int // decisions on keys of the killed shard; of them degraded
}

func (s shardTally) healthyShare() float64 { return float64(s.healthyOK) / float64(max(1, s.healthy)) }
func (s shardTally) deadShare() float64    { return float64(s.deadDegraded) / float64(max(1, s.dead)) }

// shardKilled runs the load on a fresh three-shard store, the breaker per
// shard or not, kills shard 1, and tallies the decisions made after.
func shardKilled(t *testing.T, perNode bool) shardTally {
	servers := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	url := servers[0].URL() + "?shard=" + servers[1].URL() + "&shard=" + servers[2].URL()
	rs := openRedis(t, url)
	if rs.Shards() != 3 {
		t.Fatalf("%d shards, want 3", rs.Shards())
	}
	opts := []failover.Option{
		failover.WithMode(failover.FailOpen),
		// A timeout far above a healthy call's latency, even under -race on
		// a loaded machine: this test measures the breaker, not timeouts.
		failover.WithTimeout(time.Second),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: chaosFailures, Cooldown: chaosCooldown}),
	}
	if perNode {
		opts = append(opts, failover.WithBreakerPerNode(func(r sluice.Request) string { return rs.NodeOf(r.Policy, r.Key) }))
	}
	fs := failover.New(rs, opts...)
	p := &sluice.Policy{Name: "shards", Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Hour}
	keys := make([]string, 48)
	shardOf := make([]int, len(keys))
	ctx := context.Background()
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		shardOf[i] = rs.ShardOf(p, keys[i])
		if r, err := fs.Decide(ctx, sluice.Request{Policy: p, Key: keys[i], Cost: 1}); err != nil || r.Degraded {
			t.Fatalf("before the kill, %s: %+v, %v", keys[i], r, err)
		}
	}
	servers[1].Kill()

	const workers, perWorker = 8, 300
	var mu sync.Mutex
	var tally shardTally
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine shardTally
			for i := range perWorker {
				k := (w*perWorker + i) % len(keys)
				r, err := fs.Decide(ctx, sluice.Request{Policy: p, Key: keys[k], Cost: 1})
				if err != nil {
					t.Errorf("fail open returned %v", err)
					return
				}
				if shardOf[k] == 1 {
					mine.dead++
					if r.Degraded {
						mine.deadDegraded++
					}
				} else {
					mine.healthy++
					if !r.Degraded {
						mine.healthyOK++
					}
				}
			}
			mu.Lock()
			tally.healthy += mine.healthy
			tally.healthyOK += mine.healthyOK
			tally.dead += mine.dead
			tally.deadDegraded += mine.deadDegraded
			mu.Unlock()
		}()
	}
	wg.Wait()
	if perNode && fs.OpenNodes() != 1 {
		t.Errorf("%d breakers not closed after the kill, want the dead shard's alone", fs.OpenNodes())
	}
	if tally.dead == 0 || tally.healthy == 0 {
		t.Fatalf("the keys do not cover the shards: %+v", tally)
	}
	return tally
}
