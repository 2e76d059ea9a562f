package rlqs

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// TestFairSharesTwoNodesRedis: two Sluice nodes, each with its own Redis
// store on one redis-server and no Board given — as two `sluice serve`
// processes sharing a Redis run — divide the limit among the four Envoys
// spread over them as one node does.
func TestFairSharesTwoNodesRedis(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(time.Unix(1e9, 0))
	var nodes []*node
	for range 2 {
		rs, err := redisstore.Open(srv.URL(), redisstore.WithClock(clock), redisstore.WithTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, startNodeOn(t, clock, storestack.Of(rs)))
	}
	if _, ok := nodes[0].srv.board.(*StoreBoard); !ok {
		t.Fatalf("the board on a Redis store is a %T, want its StoreBoard", nodes[0].srv.board)
	}
	a, b := nodes[0], nodes[1]
	envoys := []*envoy{dial(t, a, "edge"), dial(t, b, "edge"), dial(t, a, "edge"), dial(t, b, "edge")}
	id := apiBucket("acme")
	converge(t, envoys, id, demands)
	waitShares(t, envoys, id, shares, 1000)

	// A stream closed on one node frees its share for the Envoys on both:
	// the other node's learn of it at their next report.
	envoys[3].close()
	for _, e := range envoys[:3] {
		answered(t, e, e.tick)
	}
	waitShares(t, envoys[:3], id, []float64{133, 233, 633}, 1000)
}
