package redisstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// After a master dies and its replica takes over, the calls that fail on the
// dead master make the store read the slot map again until it changes: NodeOf
// names the new master although the periodic refresh (every hour here) never
// runs.
func TestSlotMapFollowsAFailoverOnFailedCalls(t *testing.T) {
	cl, client := startClusterClient(t, 1)
	r := &rueidisRunner{c: client, cluster: true, nodes: newClusterNodes(client, time.Hour)}
	s := NewWithRunner(r, WithTimeout(2*time.Second))
	p := &sluice.Policy{Name: "failover", Algorithm: sluice.GCRA, Limit: 1e6, Period: time.Second}
	const key = "user:1"
	testwait.Until(t, "NodeOf names the key's master", func() bool { return s.NodeOf(p, key) != "" })
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
	// Decisions on the key fail until the replica is promoted and rueidis
	// finds it; each failure asks for fresh readings of the map.
	var promoted string
	testwait.Until(t, "NodeOf names the promoted replica", func() bool {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = s.Decide(dctx, sluice.Request{Policy: p, Key: key, Cost: 1})
		cancel()
		if promoted == "" {
			masters := cl.Masters()
			for _, m := range masters {
				if !slices.Contains(before, m.Addr()) && len(masters) == 3 {
					promoted = m.Addr()
				}
			}
		}
		return promoted != "" && s.NodeOf(p, key) == promoted
	})
}

// startClusterClient starts a Cluster of three masters, each with replicas
// and a rueidis client on it, closed when the test ends.
func startClusterClient(t *testing.T, replicas int) (*redistest.Cluster, rueidis.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3, replicas)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return cl, client
}

// Calls failing without pause read the slot map at most once per
// nodesRetrigger, however fast they fail: the bound holds on a machine of any
// speed (a slow one reads less often, never more).
func TestSlotMapReadingsAreRateLimited(t *testing.T) {
	cl, client := startClusterClient(t, 0)
	n := newClusterNodes(client, time.Hour)
	testwait.Until(t, "the first reading of the map", func() bool { return n.table.Load() != nil && !n.busy.Load() })
	before := clusterSlotsCalls(t, cl)
	start := time.Now()
	failed := 0
	for time.Since(start) < 500*time.Millisecond {
		n.stale()
		failed++
	}
	testwait.Until(t, "the last reading ends", func() bool { return !n.busy.Load() })
	elapsed := time.Since(start)
	readings := clusterSlotsCalls(t, cl) - before
	if most := int(elapsed/nodesRetrigger) + 1; readings < 1 || readings > most {
		t.Errorf("%d failed calls in %v read the map %d times, want 1 to %d", failed, elapsed, readings, most)
	}
}

// clusterSlotsCalls counts the readings of the slot map (CLUSTER SHARDS and
// CLUSTER SLOTS) every node has served.
func clusterSlotsCalls(t *testing.T, cl *redistest.Cluster) int {
	t.Helper()
	return clusterCalls(t, cl, "shards") + clusterCalls(t, cl, "slots")
}

func TestSlotTableSameOwners(t *testing.T) {
	three := []slotRange{{0, 5460, "a:1"}, {5461, 10922, "b:1"}, {10923, 16383, "c:1"}}
	reordered := []slotRange{{10923, 16383, "c:1"}, {0, 5460, "a:1"}, {5461, 10922, "b:1"}}
	moved := []slotRange{{0, 5460, "a:1"}, {5461, 10922, "d:1"}, {10923, 16383, "c:1"}}
	oneSlot := []slotRange{{0, 5460, "a:1"}, {5461, 10921, "b:1"}, {10922, 16383, "c:1"}}
	base := newSlotTable(three, nil)
	for _, c := range []struct {
		name string
		u    *slotTable
		want bool
	}{
		{"the same ranges", newSlotTable(three, nil), true},
		{"the same ranges in another order", newSlotTable(reordered, nil), true},
		{"a range on a new master", newSlotTable(moved, nil), false},
		{"one slot moved", newSlotTable(oneSlot, nil), false},
		{"no map", nil, false},
	} {
		if got := base.sameOwners(c.u); got != c.want {
			t.Errorf("%s: sameOwners = %v, want %v", c.name, got, c.want)
		}
	}
	var none *slotTable
	if !none.sameOwners(nil) {
		t.Error("two missing maps differ")
	}
}

// giveSlotAway moves slot, which must hold no key, from its owner from to
// another master, and returns that master and its address.
func giveSlotAway(t *testing.T, cl *redistest.Cluster, slot int, from string) (*redistest.Server, string) {
	t.Helper()
	target := cl.Nodes[slices.IndexFunc(cl.Nodes, func(n *redistest.Server) bool { return n.Addr() != from })]
	id, err := target.Do("CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}
	// The slot holds no key, so it may be given away at once: first to its
	// new owner, then everywhere else.
	for _, n := range append([]*redistest.Server{target}, cl.Nodes...) {
		if out, err := n.Do("CLUSTER", "SETSLOT", strconv.Itoa(slot), "NODE", strings.TrimSpace(id)); err != nil || strings.TrimSpace(out) != "OK" {
			t.Fatalf("CLUSTER SETSLOT %d NODE %s on %s: %q, %v", slot, target.Addr(), n.Addr(), out, err)
		}
	}
	return target, target.Addr()
}

// A slot moved by resharding: the client follows the MOVED replies by itself,
// so no call fails, and the map shows the new owner at its next periodic
// reading; decisions go on meanwhile.
func TestSlotMapFollowsAMovedSlot(t *testing.T) {
	cl, client := startClusterClient(t, 0)
	s := New(client, WithTimeout(5*time.Second))
	p := &sluice.Policy{Name: "moved", Algorithm: sluice.FixedWindow, Limit: 1e6, Period: time.Minute}
	const key = "user:2"
	testwait.Until(t, "NodeOf names the key's master", func() bool { return s.NodeOf(p, key) != "" })
	from := s.NodeOf(p, key)
	target, to := giveSlotAway(t, cl, Slot(s.Key(p, key)), from)
	ctx := context.Background()
	decided := 0
	testwait.Until(t, "NodeOf names the slot's new owner "+to, func() bool {
		if _, err := s.Decide(ctx, sluice.Request{Policy: p, Key: key, Cost: 1}); err != nil {
			t.Fatalf("Decide after the slot moved: %v", err)
		}
		decided++
		return s.NodeOf(p, key) == to
	})
	if state, err := target.Do("GET", s.Key(p, key)); err != nil || state == "" {
		t.Errorf("the key's state is not on its new owner %s after %d decisions: %q, %v", to, decided, state, err)
	}
}
