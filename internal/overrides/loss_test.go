package overrides

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// poll runs one version check on each node, as Run does every poll interval.
func poll(t *testing.T, nodes ...*Store) {
	t.Helper()
	for i, s := range nodes {
		if err := s.Reload(context.Background()); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

// listed is what a node enforces, one line per override.
func listed(s *Store) []string {
	var out []string
	for _, o := range s.Snapshot().List("", s.Now()) {
		out = append(out, fmt.Sprintf("%s %s %d/%v", o.Policy, o.Target(), o.Limit, o.Period))
	}
	return out
}

// opener starts a node on the Redis under test.
type opener func(*testing.T) *Store

// on is the opener of nodes on srv.
func on(srv *redistest.Server) opener {
	return func(t *testing.T) *Store { return redisStore(t, srv) }
}

// agree fails unless every node enforces what a node started now reads from
// Redis, and that is want.
func agree(t *testing.T, open opener, want []string, nodes ...*Store) {
	t.Helper()
	fresh := open(t)
	if err := fresh.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := listed(fresh); !slices.Equal(got, want) {
		t.Errorf("a node started now reads %q, want %q", got, want)
	}
	for i, s := range nodes {
		if got := listed(s); !slices.Equal(got, want) {
			t.Errorf("node %d enforces %q, want %q (what Redis holds)", i, got, want)
		}
	}
}

// prime sets overrides through a, with many changes so that the version is
// well past where a reset counter starts, and brings both nodes up to date.
func prime(t *testing.T, a, b *Store) {
	t.Helper()
	ctx := context.Background()
	for i := range 30 {
		if _, err := a.Put(ctx, base, Override{Key: "k" + itoa(i%5), Limit: 1000 + int64(i), Period: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	other := base
	other.Name = "other"
	if _, err := a.Put(ctx, other, Override{Prefix: "t:", Limit: 500, Period: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	poll(t, a, b)
	if n := b.Snapshot().Len(); n != 6 {
		t.Fatalf("node b holds %d overrides, want 6", n)
	}
}

// afterLoss checks what must hold once Redis lost the overrides: one poll
// brings both nodes to what Redis holds (want), a change made afterwards is
// applied by both, and a deleted one is gone everywhere.
func afterLoss(t *testing.T, open opener, a, b *Store, want []string) {
	t.Helper()
	ctx := context.Background()
	poll(t, a, b)
	agree(t, open, want, a, b)

	if _, err := a.Put(ctx, base, Override{Key: "new", Limit: 3, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	poll(t, b)
	with := append(slices.Clone(want), "api k:new 3/1h0m0s")
	slices.Sort(with)
	agree(t, open, with, a, b)

	if err := b.Delete(ctx, "api", "k:new"); err != nil {
		t.Fatalf("deleting the override set after the loss: %v", err)
	}
	poll(t, a)
	agree(t, open, want, a, b)
}

// TestRedisDataLoss: when Redis loses every key (FLUSHALL, FLUSHDB, a
// restart without persistence) the nodes notice at their next version
// check, though Redis' counter starts again from zero, and enforce what
// Redis holds: nothing. Changes made afterwards reach every node.
func TestRedisDataLoss(t *testing.T) {
	for name, lose := range map[string]func(*testing.T, *redistest.Server){
		"flushall": func(t *testing.T, srv *redistest.Server) { redisDo(t, srv, "FLUSHALL") },
		"flushdb":  func(t *testing.T, srv *redistest.Server) { redisDo(t, srv, "FLUSHDB") },
		"restart":  func(_ *testing.T, srv *redistest.Server) { srv.Restart() },
	} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			a, b := redisStore(t, srv), redisStore(t, srv)
			prime(t, a, b)
			lose(t, srv)
			afterLoss(t, on(srv), a, b, nil)
			if err := a.Delete(context.Background(), "api", "k:k1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("deleting an override Redis lost: got %v, want ErrNotFound", err)
			}
		})
	}
}

// TestRedisKeyLost: whichever one of the overrides' keys Redis loses (a
// maxmemory allkeys-* policy evicts keys one at a time), one poll brings
// every node to what Redis then holds, and the nodes keep agreeing after.
func TestRedisKeyLost(t *testing.T) {
	srv := redistest.Start(t)
	a, b := redisStore(t, srv), redisStore(t, srv)
	prime(t, a, b)
	keys := strings.Fields(redisDo(t, srv, "KEYS", DefaultRedisPrefix+"*"))
	if len(keys) < 2 {
		t.Fatalf("the overrides are kept in %q", keys)
	}
	srv.Kill()
	for _, key := range keys {
		t.Run(strings.TrimPrefix(key, DefaultRedisPrefix), func(t *testing.T) {
			srv := redistest.Start(t)
			a, b := redisStore(t, srv), redisStore(t, srv)
			prime(t, a, b)
			redisDo(t, srv, "DEL", key)
			fresh := redisStore(t, srv)
			if err := fresh.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
			afterLoss(t, on(srv), a, b, listed(fresh))
		})
	}
}

// redisDo runs a command on srv with redis-cli.
func redisDo(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	out, err := srv.Do(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRedisDataLossRun: nodes running as a server runs them notice a
// FLUSHALL on their own (nothing is published) and go back to what Redis
// holds; a change made afterwards reaches both.
func TestRedisDataLossRun(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*Store
	var done []chan struct{}
	for range 2 {
		s := redisStore(t, srv, WithPollInterval(20*time.Millisecond))
		nodes = append(nodes, s)
		d := make(chan struct{})
		done = append(done, d)
		go func() { defer close(d); s.Run(ctx) }()
	}
	defer func() {
		cancel()
		for _, d := range done {
			<-d
		}
	}()
	waitAll := func(what string, ok func(*Set) bool) {
		t.Helper()
		for i, s := range nodes {
			testwait.Until(t, fmt.Sprintf("node %d seeing %s", i, what), func() bool { return ok(s.Snapshot()) })
		}
	}
	for i := range 10 {
		if _, err := nodes[0].Put(ctx, base, Override{Prefix: "acme:", Limit: 1000 + int64(i), Period: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	waitAll("the override", func(s *Set) bool { o := s.Lookup("api", "acme:1", time.Now()); return o != nil && o.Limit == 1009 })
	redisDo(t, srv, "FLUSHALL")
	waitAll("the loss", func(s *Set) bool { return s.Len() == 0 })
	if _, err := nodes[1].Put(ctx, base, Override{Key: "acme:1", Limit: 3, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	waitAll("a change after the loss", func(s *Set) bool { o := s.Lookup("api", "acme:1", time.Now()); return o != nil && o.Limit == 3 })
}
