package storestack

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestOpenStoreClusterBreakerPerMaster: a store opened on a Cluster URL, as
// serve opens it (lazily), has a breaker per master. One master killed (no
// replica, cluster-require-full-coverage no) sends its keys to the fail
// policy while the other masters' keys are still decided by Redis; the
// transition is logged with the dead master's address.
func TestOpenStoreClusterBreakerPerMaster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0, redistest.WithArgs("--cluster-require-full-coverage", "no"))
	logs := &syncLog{}
	st, err := Open(config.Store{URL: c.URL(), OnError: "open", Timeout: time.Second,
		Breaker: config.Breaker{MinCalls: 3, Cooldown: time.Minute}}, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs, rs := st.Failover, st.Redis
	p := &sluice.Policy{Name: "masters", Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Hour}
	ctx := context.Background()
	// The connection and the slot map come in the background.
	testwait.UntilSaw(t, "a master named for k0", func() (bool, string) {
		r, err := fs.Decide(ctx, sluice.Request{Policy: p, Key: "k0", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rs.NodeOf(p, "k0") != "", fmt.Sprintf("decision %+v", r)
	})
	keys := make([]string, 30)
	nodeOf := make([]string, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		nodeOf[i] = rs.NodeOf(p, keys[i])
	}
	victim := nodeOf[0]
	for _, srv := range c.Nodes {
		if srv.Addr() == victim {
			srv.Kill()
		}
	}
	var healthy, healthyByRedis, dead, deadDegraded int
	for range 5 {
		for i, k := range keys {
			r, err := fs.Decide(ctx, sluice.Request{Policy: p, Key: k, Cost: 1})
			if err != nil {
				t.Fatalf("fail open returned %v", err)
			}
			if nodeOf[i] == victim {
				dead++
				if r.Degraded {
					deadDegraded++
				}
			} else {
				healthy++
				if !r.Degraded {
					healthyByRedis++
				}
			}
		}
	}
	t.Logf("after killing %s: %d of %d decisions on the other masters' keys by Redis, %d of %d on its keys degraded",
		victim, healthyByRedis, healthy, deadDegraded, dead)
	if healthy == 0 || dead == 0 {
		t.Fatalf("30 keys do not cover a dead and a live master: %v", nodeOf)
	}
	if healthyByRedis < healthy*9/10 || deadDegraded != dead {
		t.Errorf("want (nearly) every live master's decision by Redis and every dead one's degraded")
	}
	if fs.OpenNodes() != 1 || fs.State() != failover.BreakerOpen {
		t.Errorf("%d breakers not closed, state %v; want the dead master's open", fs.OpenNodes(), fs.State())
	}
	if !strings.Contains(logs.String(), "node="+victim) {
		t.Errorf("no breaker transition logged for node=%s:\n%s", victim, logs.String())
	}
}
