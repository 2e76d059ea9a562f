package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// testInFlightNodes: two nodes — stores with clients of their own — share
// one Redis (or Cluster) on its TIME. N+1 acquisitions at once across them
// admit exactly N; a slot acquired on one node is released on the other; and
// the slots of a node that crashed come back when their leases end on Redis'
// clock, not before.
func testInFlightNodes(t *testing.T, url string) {
	ctx := context.Background()
	prefix := rstest.Prefix()
	node := func() *redisstore.Store {
		s, err := redisstore.Open(url, redisstore.WithPrefix(prefix), redisstore.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	p := sluice.Policy{Name: "inflight", Algorithm: sluice.Concurrency, Limit: 5, Period: time.Second}
	limiter := func(s *redisstore.Store) *sluice.Limiter {
		l, err := sluice.New(s, p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := node(), node()
	la, lb := limiter(a), limiter(b)

	// N+1 at once, from both nodes.
	start := make(chan struct{})
	var mu sync.Mutex
	var slots []*sluice.Slot
	var wg sync.WaitGroup
	for i := range p.Limit + 1 {
		l := []*sluice.Limiter{la, lb}[i%2]
		wg.Go(func() {
			<-start
			res, s, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			if res.Allowed {
				mu.Lock()
				slots = append(slots, s)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if int64(len(slots)) != p.Limit {
		t.Fatalf("%d acquisitions at once on two nodes admitted %d, want %d", p.Limit+1, len(slots), p.Limit)
	}
	for _, s := range slots { // tokens are shared: node b releases them all
		if ok, err := lb.Release(ctx, "k", s.Token()); !ok || err != nil {
			t.Fatalf("release on node b: %v, %v", ok, err)
		}
	}

	// Node a takes every slot and crashes: its tokens are lost.
	for range p.Limit {
		if res, _, err := la.Acquire(ctx, "k"); err != nil || !res.Allowed {
			t.Fatalf("node a: %+v, %v", res, err)
		}
	}
	c := newClient(t, url)
	key := b.Key(&p, "k")
	held, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || int64(len(held)) != p.Limit {
		t.Fatalf("ZRANGE %s: %v, %v", key, held, err)
	}
	a.Close()
	oldest := int64(held[0].Score)

	// Node b gets a slot back once the oldest lease has ended on Redis TIME.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, s, err := lb.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			at, err := c.Do(ctx, c.B().Zscore().Key(key).Member(s.Token()).Build()).AsFloat64()
			if err != nil {
				t.Fatal(err)
			}
			if got := int64(at) - oldest; got < p.Period.Microseconds() {
				t.Fatalf("a crashed node's slot came back %dµs after it was acquired, before its lease of %v", got, p.Period)
			}
			break
		}
		if res.RetryAfter <= 0 || res.RetryAfter > p.Period {
			t.Fatalf("denied with %+v: RetryAfter must be within the lease", res)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a crashed node's slots are still held after 30s: %+v", res)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every crashed slot comes back in the end.
	for time.Now().Before(deadline) {
		res, err := lb.Held(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if res.Remaining == p.Limit-1 { // all but b's own
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("a crashed node's slots are still held after 30s")
}
