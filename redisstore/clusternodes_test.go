package redisstore_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// randomKey is a key of up to 12 bytes drawn from letters, braces (hash tags,
// empty or not, nested or unclosed), '%' (the store's escape) and ':'.
func randomKey(rng *rand.Rand) string {
	const alphabet = "ab{}{}%:"
	b := make([]byte, rng.IntN(13))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// testNodes: for keys of every shape, NodeOf names the master that serves
// them — the node that answers for the key, where the others answer MOVED —
// and the keys cover all three masters.
func testNodes(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	s, err := redisstore.Open(cl.URL(), rstest.Defaults()...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cl.Nodes[0].Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	owner := func(key string) string {
		err := one.Do(ctx, one.B().Exists().Key(key).Build()).Error()
		if err == nil {
			return cl.Nodes[0].Addr()
		}
		if e, ok := rueidis.IsRedisErr(err); ok {
			if addr, moved := e.IsMoved(); moved {
				return addr
			}
		}
		t.Fatalf("EXISTS %q on %s: %v", key, cl.Nodes[0].Addr(), err)
		return ""
	}
	p := &sluice.Policy{Name: "nodes", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	// The slot map is read in the background from the store's start.
	testwait.Until(t, "NodeOf naming a node after Open", func() bool { return s.NodeOf(p, "k") != "" })
	rng := rand.New(rand.NewPCG(15, 4))
	masters := map[string]int{}
	for range 300 {
		key := randomKey(rng)
		got, want := s.NodeOf(p, key), owner(s.Key(p, key))
		if got != want {
			t.Errorf("NodeOf(%q) = %q; the key's slot is served by %q", key, got, want)
		}
		masters[got]++
	}
	if len(masters) != 3 {
		t.Errorf("300 keys named the masters %v, want all three", masters)
	}
}
