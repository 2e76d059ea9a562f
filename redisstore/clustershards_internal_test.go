package redisstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// slotsTable reads the slot map with CLUSTER SLOTS from node 0, as a
// reference for the map the store reads with CLUSTER SHARDS.
func slotsTable(t *testing.T, cl *redistest.Cluster, client rueidis.Client) *slotTable {
	t.Helper()
	addr := cl.Nodes[0].Addr()
	node, ok := client.Nodes()[addr]
	if !ok {
		t.Fatalf("the client does not know %s", addr)
	}
	reply, err := node.Do(context.Background(), node.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	return newSlotTable(slotRanges(reply, addr), nil)
}

// readSettled waits for n's first reading of the map to end.
func readSettled(t *testing.T, n *clusterNodes) {
	t.Helper()
	testwait.Until(t, "the first reading of the map", func() bool { return n.table.Load() != nil && !n.busy.Load() })
}

// On Redis 7 the store reads slot owners from CLUSTER SHARDS, replicas
// and all, and gets the map CLUSTER SLOTS gives.
func TestSlotMapReadsClusterShards(t *testing.T) {
	cl, client := startClusterClient(t, 1)
	before := clusterCalls(t, cl, "shards")
	n := newClusterNodes(client, time.Hour)
	readSettled(t, n)
	if n.noShards.Load() {
		t.Fatal("the store fell back to CLUSTER SLOTS on a Redis that has CLUSTER SHARDS")
	}
	if calls := clusterCalls(t, cl, "shards") - before; calls < 1 {
		t.Fatalf("no CLUSTER SHARDS served (%d)", calls)
	}
	want, got := slotsTable(t, cl, client), n.table.Load()
	if !got.sameOwners(want) {
		t.Fatalf("the map from CLUSTER SHARDS (masters %v) differs from CLUSTER SLOTS' (%v)", got.masters, want.masters)
	}
	var masters []string
	for _, m := range cl.Masters() {
		masters = append(masters, m.Addr())
	}
	for slot := range clusterSlots {
		if m := got.masters[got.owner[slot]]; !slices.Contains(masters, m) {
			t.Fatalf("slot %d: %q, not one of the masters %v", slot, m, masters)
		}
	}
}

// A server that refuses CLUSTER SHARDS (here an ACL forbids it, as an older
// Redis refuses it as unknown) makes the store read CLUSTER SLOTS, from then
// on without asking for SHARDS again.
func TestSlotMapFallsBackToClusterSlots(t *testing.T) {
	cl, client := startClusterClient(t, 0)
	for _, node := range cl.Nodes {
		if out, err := node.Do("ACL", "SETUSER", "default", "-cluster|shards"); err != nil || out != "OK" {
			t.Fatalf("ACL SETUSER on %s: %q, %v", node.Addr(), out, err)
		}
	}
	n := newClusterNodes(client, time.Hour)
	readSettled(t, n)
	if !n.noShards.Load() {
		t.Fatal("a refused CLUSTER SHARDS did not make the store read CLUSTER SLOTS")
	}
	if want := slotsTable(t, cl, client); !n.table.Load().sameOwners(want) {
		t.Fatalf("the map read after the refusal (masters %v) differs from CLUSTER SLOTS' (%v)", n.table.Load().masters, want.masters)
	}
	shards := clusterCalls(t, cl, "shards")
	n.stale()
	testwait.Until(t, "the next reading", func() bool { return !n.busy.Load() })
	if again := clusterCalls(t, cl, "shards"); again != shards {
		t.Errorf("CLUSTER SHARDS asked again after a refusal: %d calls, then %d", shards, again)
	}
}

// A MOVED reply that reaches the store (rueidis follows most of them by
// itself) makes it read the map again at once: NodeOf names the slot's new
// owner although the periodic reading (every hour here) never runs.
func TestSlotMapReadAgainOnMoved(t *testing.T) {
	cl, client := startClusterClient(t, 0)
	r := &rueidisRunner{c: client, cluster: true, nodes: newClusterNodes(client, time.Hour)}
	readSettled(t, r.nodes)
	const key = "moved:{1}"
	slot := Slot(key)
	from := r.nodes.of(slot)
	_, to := giveSlotAway(t, cl, slot, from)
	old, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{from}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	res := old.Do(context.Background(), old.B().Get().Key(key).Build())
	if e, ok := rueidis.IsRedisErr(res.Error()); !ok || !strings.HasPrefix(e.Error(), "MOVED") {
		t.Fatalf("GET %s on its old owner %s: %v, want MOVED", key, from, res.Error())
	}
	if r.nodes.of(slot) != from {
		t.Fatalf("the map changed before the MOVED reply: %q", r.nodes.of(slot))
	}
	_ = r.checked(res)
	testwait.Until(t, "NodeOf names the slot's new owner "+to, func() bool { return r.nodes.of(slot) == to })
}

// clusterCalls counts the CLUSTER sub commands every node has served.
func clusterCalls(t *testing.T, cl *redistest.Cluster, sub string) int {
	t.Helper()
	total := 0
	for _, node := range cl.Nodes {
		out, err := node.Do("INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_cluster|"+sub+":calls="); ok {
				calls, _, _ := strings.Cut(rest, ",")
				n, err := strconv.Atoi(calls)
				if err != nil {
					t.Fatalf("INFO commandstats: %q", line)
				}
				total += n
			}
		}
	}
	return total
}

// FuzzShardRanges: whatever shards a node reports, every range goes to a
// node of its shard whose role is master, an online one when the shard has
// one, and a shard without a master gives no range.
func FuzzShardRanges(f *testing.F) {
	f.Add([]byte{0, 0, 0x3f, 0xff, 2, 0, 1, 0, 2, 1, 1})
	f.Add([]byte{0, 5, 0, 9, 3, 0, 2, 1, 0, 1, 3, 0, 0, 0})
	f.Add([]byte{0x20, 0, 0x10, 0, 1, 3, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		shards := decodeShards(b)
		known := func(a string) bool { return strings.HasSuffix(a, ":7") }
		ranges := shardRanges(shards, "10.0.0.1:1", known)
		i := 0
		for _, sh := range shards {
			online, has := false, false
			for _, n := range sh.nodes {
				if n.role == "master" && n.addr("10.0.0.1:1", known) != "" {
					has = true
					online = online || n.health == "online"
				}
			}
			if !has {
				continue
			}
			for j := 0; j+1 < len(sh.slots); j += 2 {
				if i >= len(ranges) {
					t.Fatalf("shard %+v gave too few ranges: %v", sh, ranges)
				}
				m := slices.IndexFunc(sh.nodes, func(n shardNode) bool {
					return n.role == "master" && n.addr("10.0.0.1:1", known) == ranges[i].master && (!online || n.health == "online")
				})
				if m < 0 || ranges[i].from != sh.slots[j] || ranges[i].to != sh.slots[j+1] {
					t.Fatalf("range %+v is not shard %+v's", ranges[i], sh)
				}
				i++
			}
		}
		if i != len(ranges) {
			t.Fatalf("%d ranges, want %d", len(ranges), i)
		}
		newSlotTable(ranges, nil) // and the map takes whatever they say
	})
}

// decodeShards reads per shard: from and to (signed 16-bit), a node count,
// then per node its role (even: master), health (0: online, 1: failed, 2:
// loading), endpoint (0: "", 1: "?", else a host) and port (0: none, 7:
// also a TLS port the client knows).
func decodeShards(b []byte) []shardInfo {
	var shards []shardInfo
	for len(b) >= 5 {
		sh := shardInfo{slots: []int64{int64(int16(uint16(b[0])<<8 | uint16(b[1]))), int64(int16(uint16(b[2])<<8 | uint16(b[3])))}}
		count := int(b[4] % 4)
		b = b[5:]
		for ; count > 0 && len(b) >= 4; count-- {
			n := shardNode{role: "replica", health: []string{"online", "failed", "loading"}[b[1]%3], port: int64(b[3] % 8)}
			if b[0]%2 == 0 {
				n.role = "master"
			}
			switch b[2] % 4 {
			case 1:
				n.endpoint = "?"
			case 2, 3:
				n.endpoint = "h" + strconv.Itoa(int(b[2]%4))
			}
			if n.port == 7 {
				n.tlsPort = 7
			}
			sh.nodes = append(sh.nodes, n)
			b = b[4:]
		}
		shards = append(shards, sh)
	}
	return shards
}
