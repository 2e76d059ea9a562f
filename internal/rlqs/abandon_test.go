package rlqs

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/storetest"
)

// TestAbandon: a bucket whose reports stop is abandoned once its assignment's
// time to live has passed: its Envoy gets an AbandonAction, and its share
// goes to the Envoys still reporting. Before that, a sweep leaves it alone.
func TestAbandon(t *testing.T) {
	clock := storetest.NewClock(time.Unix(1e9, 0))
	n := startNode(t, clock)
	quiet, busy := dial(t, n, "edge"), dial(t, n, "edge")
	id := apiBucket("k")
	converge(t, []*envoy{quiet, busy}, id, []float64{100, 5000})
	waitShares(t, []*envoy{quiet, busy}, id, []float64{100, 900}, 1000)

	ttl := TTLIntervals * interval
	clock.Advance(ttl - time.Millisecond)
	answered(t, busy, busy.tick)
	n.srv.Sweep()
	if quiet.assigned(id) != 100 {
		t.Fatalf("swept before its time to live: assigned %v", quiet.assigned(id))
	}

	clock.Advance(time.Millisecond)
	n.srv.Sweep()
	testwait.Until(t, "the quiet bucket abandoned", func() bool {
		quiet.mu.Lock()
		defer quiet.mu.Unlock()
		return quiet.abandoned == 1 && quiet.buckets[bucketName(id)] == nil
	})
	testwait.Until(t, "its share given to the busy Envoy", func() bool { return busy.assigned(id) == 1000 })
	members, _ := n.srv.board.Report(t.Context(), limit{policy: n.svc.Config().Policy("api"), key: "k"}.boardBucket(), "probe", 0, time.Second)
	if len(members) != 2 { // busy's and the probe
		t.Errorf("board members after abandoning %v, want the busy Envoy's and the probe", members)
	}
}

// TestAssignmentTTL: an assignment lives TTLIntervals report intervals (at
// least MinTTL); the one answering a subscription, whose interval is not
// known yet, FirstTTL.
func TestAssignmentTTL(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)))
	for _, c := range []struct {
		interval, want time.Duration
	}{{0, FirstTTL}, {50 * time.Millisecond, FirstTTL}, {200 * time.Millisecond, MinTTL}, {time.Second, 3 * time.Second}, {time.Minute, 3 * time.Minute}} {
		if got := n.srv.ttlOf(readUsage(usageOver(c.interval), DefaultMaxElapsed).interval); got != c.want {
			t.Errorf("reported every %v: time to live %v, want %v", c.interval, got, c.want)
		}
	}
}
