package overrides

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedisClusterSlotMoved: the overrides' slot moves to another master
// (resharding, key by key with MIGRATE): their keys share a hash tag and
// move together, so nothing is lost: the nodes read no full copy, keep what
// they enforce, and changes go on reaching every node.
func TestRedisClusterSlotMoved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3, 0)
	open := func(t *testing.T) *Store {
		s := NewRedis(rueidis.ClientOption{InitAddress: cl.Addrs()}, quiet)
		t.Cleanup(s.Close)
		return s
	}
	a, b := open(t), open(t)
	prime(t, a, b)
	want := listed(a)
	fullReads := func() float64 {
		return testutil.ToFloat64(a.reads.WithLabelValues("full")) + testutil.ToFloat64(b.reads.WithLabelValues("full"))
	}
	before := fullReads()

	slot := redisDo(t, cl.Nodes[0], "CLUSTER", "KEYSLOT", DefaultRedisPrefix+"overrides")
	masters := cl.Masters()
	from := slices.IndexFunc(masters, func(n *redistest.Server) bool {
		return redisDo(t, n, "CLUSTER", "COUNTKEYSINSLOT", slot) != "0"
	})
	if from < 0 {
		t.Fatalf("no master holds slot %s", slot)
	}
	src, dst := masters[from], masters[(from+1)%len(masters)]
	srcID, dstID := redisDo(t, src, "CLUSTER", "MYID"), redisDo(t, dst, "CLUSTER", "MYID")
	redisDo(t, dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	redisDo(t, src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	keys := strings.Fields(redisDo(t, src, "CLUSTER", "GETKEYSINSLOT", slot, "100"))
	if len(keys) < 4 {
		t.Fatalf("slot %s holds %q", slot, keys)
	}
	redisDo(t, src, append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(dst.Port()), "", "0", "5000", "KEYS"}, keys...)...)
	for _, n := range append([]*redistest.Server{dst, src}, cl.Nodes...) {
		redisDo(t, n, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}

	afterLoss(t, open, a, b, want)
	if got := fullReads() - before; got != 0 {
		t.Errorf("the nodes read every override %v times after the slot moved, want none: nothing was lost", got)
	}
	if n := redisDo(t, dst, "CLUSTER", "COUNTKEYSINSLOT", slot); n != strconv.Itoa(len(keys)) {
		t.Errorf("the slot's new master holds %s keys, want %d", n, len(keys))
	}
}
