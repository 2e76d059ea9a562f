package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// After a master dies and its replica takes over, the first calls that fail
// on the dead master make the store read the slot map again: NodeOf names the
// new master although the periodic refresh (every hour here) never runs.
func TestSlotMapFollowsAFailoverOnFailedCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3, 1)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	r := &rueidisRunner{c: client, cluster: true, nodes: newClusterNodes(client, time.Hour)}
	s := NewWithRunner(r, WithTimeout(2*time.Second))
	p := &sluice.Policy{Name: "failover", Algorithm: sluice.GCRA, Limit: 1e6, Period: time.Second}
	const key = "user:1"
	waitFor(t, 10*time.Second, "NodeOf names the key's master", func() bool { return s.NodeOf(p, key) != "" })
	ctx := context.Background()
	if _, err := s.Decide(ctx, sluice.Request{Policy: p, Key: key, Cost: 1}); err != nil {
		t.Fatal(err)
	}

	old := s.NodeOf(p, key)
	var before []string
	for _, m := range cl.Masters() {
		before = append(before, m.Addr())
	}
	dead := slices.IndexFunc(cl.Nodes, func(n *redistest.Server) bool { return n.Addr() == old })
	if dead < 0 || !slices.Contains(before, old) {
		t.Fatalf("NodeOf names %q, not one of the masters %v", old, before)
	}
	cl.Nodes[dead].Kill()
	var promoted string
	waitFor(t, 30*time.Second, "a replica takes the dead master's place", func() bool {
		masters := cl.Masters()
		promoted = ""
		for _, m := range masters {
			if !slices.Contains(before, m.Addr()) {
				promoted = m.Addr()
			}
		}
		return len(masters) == 3 && promoted != ""
	})
	if got := s.NodeOf(p, key); got != old {
		t.Fatalf("NodeOf = %q before any call failed; the map was read again by something else than a failed call (want %q)", got, old)
	}
	// Decisions on the key fail until rueidis finds the new master; each
	// failure asks for a fresh map.
	waitFor(t, 30*time.Second, "NodeOf names the promoted replica "+promoted, func() bool {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = s.Decide(dctx, sluice.Request{Policy: p, Key: key, Cost: 1})
		cancel()
		return s.NodeOf(p, key) == promoted
	})
}

// waitFor polls cond, which reads a real Redis Cluster's state, until it
// holds or within fails the test.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}
