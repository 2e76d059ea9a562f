package overrides

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/storetest"
)

func redisStore(t *testing.T, srv *redistest.Server, opts ...Option) *Store {
	t.Helper()
	opt, err := rueidis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	s := NewRedis(opt, append([]Option{quiet}, opts...)...)
	t.Cleanup(s.Close)
	return s
}

func TestRedisStore(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(t0)
	a := redisStore(t, srv, WithClock(clock))
	b := redisStore(t, srv, WithClock(clock))
	testStore(t, a, b, clock)
}

// TestRedisPropagation: a change on one Store reaches another through
// pub/sub alone (the version check is an hour away), and a new Store reads
// what is there.
func TestRedisPropagation(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := redisStore(t, srv)
	b := redisStore(t, srv, WithPollInterval(time.Hour))
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, ok func(*Set) bool) {
		t.Helper()
		testwait.Until(t, what+" seen by the other node", func() bool { return ok(b.Snapshot()) })
	}
	// The subscription may not be in place yet: set until it is seen, each
	// set a new limit, so only a published change can be the one seen.
	limit := int64(0)
	testwait.Until(t, "a change reaching the other node", func() bool {
		limit++
		if _, err := a.Put(ctx, base, Override{Prefix: "acme:", Limit: limit, Period: time.Second}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // for the published change to arrive
		o := b.Snapshot().Lookup("api", "acme:1", time.Now())
		return o != nil && o.Limit == limit
	})
	if _, err := a.Put(ctx, base, Override{Key: "acme:1", Limit: 1000, Period: time.Second}); err != nil {
		t.Fatal(err)
	}
	waitFor("a key override", func(s *Set) bool { o := s.Lookup("api", "acme:1", time.Now()); return o != nil && o.Limit == 1000 })
	if err := a.Delete(ctx, "api", "p:acme:"); err != nil {
		t.Fatal(err)
	}
	waitFor("a delete", func(s *Set) bool { return s.Lookup("api", "acme:2", time.Now()) == nil })

	c := redisStore(t, srv)
	if err := c.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Snapshot().List("", time.Now()); len(got) != 1 || got[0].Key != "acme:1" {
		t.Errorf("a new node reads %+v", got)
	}
}

// TestRedisDown: a Store whose Redis is down starts, reports
// ErrUnavailable, and keeps the last overrides it read.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := redisStore(t, srv)
	if _, err := a.Put(ctx, base, Override{Key: "k", Limit: 7, Period: time.Second}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if _, err := a.Put(ctx, base, Override{Key: "k", Limit: 8, Period: time.Second}); err == nil {
		t.Error("Put with Redis down succeeded")
	}
	if err := a.Reload(ctx); err == nil {
		t.Error("refresh with Redis down succeeded")
	}
	if o := a.Snapshot().Lookup("api", "k", time.Now()); o == nil || o.Limit != 7 {
		t.Errorf("the last overrides read are gone: %+v", o)
	}
}
