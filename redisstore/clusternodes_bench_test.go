package redisstore

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkNodeOf is what naming a key's node adds to a decision on a
// Cluster: the Redis key, its slot, the slot map's age and the lookup. The
// map is filled by hand (three masters) and never due, so no Redis is needed.
func BenchmarkNodeOf(b *testing.B) {
	n := &clusterNodes{}
	n.table.Store(newSlotTable([]slotRange{{0, 5460, "10.0.0.1:6379"}, {5461, 10922, "10.0.0.2:6379"}, {10923, 16383, "10.0.0.3:6379"}}, nil))
	n.due.Store(math.MaxInt64)
	s := NewWithRunner(&rueidisRunner{cluster: true, nodes: n})
	p := &sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s.NodeOf(p, "user:12345") == "" {
				b.Error("no node")
				return
			}
		}
	})
}
