package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
	"github.com/sluicehq/sluice/storetest"
)

// testRoute sends the policies of periods under a minute, and those named
// "user" (so that the cross-slot race spans the routes), to route 1.
func testRoute(p *sluice.Policy) int {
	if p.Period < time.Minute || p.Name == "user" {
		return 1
	}
	return 0
}

// TestRouted: a store routed over two real Redis servers passes what a
// sharded one does — the conformance suite, the differential test, the Lua
// reloaded after a flush, all-or-nothing races across the routes, batching —
// and keeps each policy's keys on its route.
func TestRouted(t *testing.T) {
	servers := []*redistest.Server{redistest.Start(t), redistest.Start(t)}
	clients := []rueidis.Client{newClient(t, servers[0].URL()), newClient(t, servers[1].URL())}
	tg := shardedTarget(servers, clients)
	tg.New = func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
		s, err := redisstore.OpenRouted([]string{servers[0].URL(), servers[1].URL()}, testRoute, append(rstest.Defaults(), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
	t.Run("Differential", func(t *testing.T) { rstest.Differential(t, tg, 300, false) })
	t.Run("NoScript", func(t *testing.T) { rstest.NoScript(t, tg) })
	t.Run("CrossRouteRace", func(t *testing.T) { rstest.CrossSlotRace(t, tg) })
	t.Run("Batch", func(t *testing.T) { testBatch(t, tg.New, false, false) })
	t.Run("Placement", func(t *testing.T) { testRoutePlacement(t, servers, tg.New) })
}

// testRoutePlacement: a per-second policy's keys are on the second server
// only, an hourly one's on the first only; a set spanning both is admitted
// or denied whole, whichever route denies; NodeOf names each route's server.
func testRoutePlacement(t *testing.T, servers []*redistest.Server, newStore func(t *testing.T, opts ...redisstore.Option) *redisstore.Store) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	s := newStore(t, redisstore.WithClock(clock))
	perSecond := &sluice.Policy{Name: "ps", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	perHour := &sluice.Policy{Name: "ph", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	if s.Routes() != 2 || s.RouteOf(perSecond) != 1 || s.RouteOf(perHour) != 0 {
		t.Fatalf("routes %d, per-second on %d, hourly on %d", s.Routes(), s.RouteOf(perSecond), s.RouteOf(perHour))
	}
	on := func(p *sluice.Policy) int {
		t.Helper()
		found := -1
		for i, srv := range servers {
			n, err := srv.Do("EXISTS", s.Key(p, "a"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(n) == "1" {
				if found >= 0 {
					t.Fatalf("%s's key on both servers", p.Name)
				}
				found = i
			}
		}
		return found
	}
	both := func(wantAllowed bool) {
		t.Helper()
		res := make([]sluice.Result, 2)
		if err := s.DecideAll(ctx, []sluice.Request{{Policy: perSecond, Key: "a", Cost: 1}, {Policy: perHour, Key: "a", Cost: 1}}, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed != wantAllowed || res[1].Allowed != wantAllowed {
			t.Fatalf("set: %+v, want allowed %v for both", res, wantAllowed)
		}
	}
	remaining := func(p *sluice.Policy, want int64) {
		t.Helper()
		if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "a"}); err != nil || r.Remaining != want {
			t.Fatalf("%s: %+v (%v), want %d remaining", p.Name, r, err, want)
		}
	}
	both(true)
	if on(perSecond) != 1 || on(perHour) != 0 {
		t.Fatalf("per-second key on server %d, hourly on %d; want 1 and 0", on(perSecond), on(perHour))
	}
	both(false) // the per-second limit denies: the hourly one is not charged
	remaining(perHour, 1)
	clock.Advance(time.Second)
	both(true)
	clock.Advance(time.Second)
	both(false) // the hourly limit denies: the per-second one is not charged
	remaining(perSecond, 1)
	if s.NodeOf(perSecond, "a") != servers[1].Addr() || s.NodeOf(perHour, "a") != servers[0].Addr() {
		t.Fatalf("NodeOf: %q and %q, want %s and %s", s.NodeOf(perSecond, "a"), s.NodeOf(perHour, "a"), servers[1].Addr(), servers[0].Addr())
	}
}

// TestOpenRoutedRefuses: fewer than two routes, no route function, and two
// routes on one server are refused.
func TestOpenRoutedRefuses(t *testing.T) {
	for _, tc := range []struct {
		urls  []string
		route func(*sluice.Policy) int
		want  string
	}{
		{[]string{"redis://127.0.0.1:1"}, testRoute, "two URLs"},
		{[]string{"redis://127.0.0.1:1", "redis://127.0.0.1:2"}, nil, "a route"},
		{[]string{"redis://127.0.0.1:1", "redis://u:p@127.0.0.1:1"}, testRoute, "both 127.0.0.1:1"},
	} {
		if _, err := redisstore.OpenRouted(tc.urls, tc.route, redisstore.WithLazyConnect()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.urls, err, tc.want)
		}
	}
}
