package goredis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/goredis"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// target returns the rstest Target of a go-redis client; forEach runs a
// command on every node.
func target(c redis.UniversalClient, forEach func(func(*redis.Client) error) error) rstest.Target {
	ctx := context.Background()
	return rstest.Target{
		New: func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
			return goredis.New(c, append(rstest.Defaults(), opts...)...)
		},
		ExpireTime: func(t *testing.T, key string) int64 {
			// Do rather than PExpireTime, whose Duration would hold the
			// far-future test times (storetest.Epoch) in nanoseconds.
			when, err := c.Do(ctx, "PEXPIRETIME", key).Int64()
			if err != nil {
				t.Fatalf("PEXPIRETIME %q: %v", key, err)
			}
			return when
		},
		FlushScripts: func(t *testing.T) {
			if err := forEach(func(n *redis.Client) error { return n.ScriptFlush(ctx).Err() }); err != nil {
				t.Errorf("SCRIPT FLUSH: %v", err)
			}
			if err := forEach(func(n *redis.Client) error { return n.FunctionFlush(ctx).Err() }); err != nil {
				t.Errorf("FUNCTION FLUSH: %v", err)
			}
		},
	}
}

func TestSingle(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	tg := target(c, func(f func(*redis.Client) error) error { return f(c) })
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
	t.Run("Differential", func(t *testing.T) { rstest.Differential(t, tg, 800, false) })
	t.Run("NoScript", func(t *testing.T) { rstest.NoScript(t, tg) })
}

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	tg := target(c, func(f func(*redis.Client) error) error {
		return c.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error { return f(n) })
	})
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
	t.Run("Differential", func(t *testing.T) { rstest.Differential(t, tg, 600, false) })
	t.Run("DifferentialOneSlot", func(t *testing.T) { rstest.Differential(t, tg, 300, true) })
	t.Run("NoScript", func(t *testing.T) { rstest.NoScript(t, tg) })
	t.Run("CrossSlotRace", func(t *testing.T) { rstest.CrossSlotRace(t, tg) })
}

// TestMode: Redis 7 runs the library's functions; a user whose ACL refuses
// FUNCTION and FCALL gets the scripts, chosen by the store itself, which pass
// the same suite.
func TestMode(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	if m, err := goredis.New(c).Mode(ctx); err != nil || m != redisstore.ModeFunctions {
		t.Fatalf("Mode = %q, %v; want %q", m, err, redisstore.ModeFunctions)
	}
	if _, err := srv.Do("ACL", "SETUSER", "nofunc", "on", ">pw", "~*", "&*", "+@all", "-function", "-fcall", "-fcall_ro"); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "nofunc", Password: "pw"})
	t.Cleanup(func() { limited.Close() })
	tg := target(limited, func(f func(*redis.Client) error) error { return f(limited) })
	if m, err := tg.New(t).Mode(ctx); err != nil || m != redisstore.ModeScripts {
		t.Fatalf("Mode with FUNCTION refused = %q, %v; want %q", m, err, redisstore.ModeScripts)
	}
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
}

// TestModeUnexpectedError: FUNCTION LOAD failing with an error of the server
// that no list foresees (a function name another library took) decides
// scripts, as with the rueidis runner.
func TestModeUnexpectedError(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	_, src := redisstore.Library()
	_, rest, _ := strings.Cut(src, "register_function('")
	fn, _, _ := strings.Cut(rest, "'")
	if _, err := srv.Do("FUNCTION", "LOAD", "#!lua name=squatter\nredis.register_function('"+fn+"', function() return 1 end)"); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	s := goredis.New(c, rstest.Defaults()...)
	if m, err := s.Mode(ctx); err != nil || m != redisstore.ModeScripts {
		t.Fatalf("Mode = %q, %v; want %q", m, err, redisstore.ModeScripts)
	}
	if why := s.ModeReason(); !strings.Contains(why, "already exists") {
		t.Errorf("ModeReason = %q", why)
	}
	p := &sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute}
	if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1}); err != nil || !r.Allowed {
		t.Fatalf("Decide in scripts mode: %+v, %v", r, err)
	}
}
