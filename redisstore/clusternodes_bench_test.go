package redisstore

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// nodeOfStores returns stores whose NodeOf names a node without Redis: a
// Cluster whose slot map (three masters) is filled by hand and never due,
// and three shards.
func nodeOfStores(tb testing.TB) map[string]*Store {
	n := &clusterNodes{}
	n.table.Store(newSlotTable([]slotRange{{0, 5460, "10.0.0.1:6379"}, {5461, 10922, "10.0.0.2:6379"}, {10923, 16383, "10.0.0.3:6379"}}, nil))
	n.due.Store(math.MaxInt64)
	sharded, err := NewShardedRunner(Shard{Name: "10.0.0.1:6379"}, Shard{Name: "10.0.0.2:6379"}, Shard{Name: "10.0.0.3:6379"})
	if err != nil {
		tb.Fatal(err)
	}
	return map[string]*Store{
		"cluster": NewWithRunner(&rueidisRunner{cluster: true, nodes: n}),
		"sharded": NewWithRunner(sharded),
	}
}

// BenchmarkNodeOf is what naming a key's node adds to a decision on a
// Cluster (the key's slot, the slot map's age and the lookup) or on shards
// (the key's hash and the highest-scoring shard).
func BenchmarkNodeOf(b *testing.B) {
	p := &sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
	for _, name := range []string{"cluster", "sharded"} {
		s := nodeOfStores(b)[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if s.NodeOf(p, "user:12345") == "" {
						b.Error("no node")
						return
					}
				}
			})
		})
	}
}
