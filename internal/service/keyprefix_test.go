package service

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storestack"
)

// useStore decides on a store and sets an override, as serve opens them
// for st, and returns what the second of two requests on one key left.
func useStore(t *testing.T, st config.Store) int64 {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	stack, err := storestack.Open(st, storestack.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	store := stack.Store
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ov, closeOv, err := OpenOverrides(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeOv()
	p := &sluice.Policy{Name: "per_key", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour}
	if _, err := ov.Put(ctx, *p, overrides.Override{Key: "vip", Limit: 100, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var last sluice.Result
	for range 2 {
		// Retried: the lazily opened store connects in the background.
		for {
			r, err := store.Decide(ctx, sluice.Request{Policy: p, Key: "alice", Cost: 1})
			if err == nil && !r.Degraded {
				last = r
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no decision from Redis: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return last.Remaining
}

// TestStoreKeyPrefix: store.key_prefix (envoyproxy/ratelimit's
// CACHE_KEY_PREFIX) starts every key Sluice writes, counters and overrides
// alike, so that two deployments with different prefixes share a Redis
// without sharing counts; on a Cluster the keys keep their hash tags, so the
// overrides' multi-key scripts still run.
func TestStoreKeyPrefix(t *testing.T) {
	srv := redistest.Start(t)
	for _, prefix := range []string{"team-a:", "team-b:"} {
		if left := useStore(t, config.Store{URL: srv.URL(), KeyPrefix: prefix, OnError: "closed"}); left != 8 {
			t.Fatalf("%s: %d left after two requests, want 8 (another prefix's count shared?)", prefix, left)
		}
	}
	out, err := srv.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	var a, b, rest []string
	for _, k := range strings.Fields(out) {
		switch {
		case strings.HasPrefix(k, "team-a:sluice:"):
			a = append(a, k)
		case strings.HasPrefix(k, "team-b:sluice:"):
			b = append(b, k)
		default:
			rest = append(rest, k)
		}
	}
	if len(a) < 2 || len(b) < 2 || len(rest) != 0 {
		t.Fatalf("keys: team-a %v, team-b %v, others %v", a, b, rest)
	}
	for _, keys := range [][]string{a, b} {
		var counter, override bool
		for _, k := range keys {
			counter = counter || strings.Contains(k, "{per_key:alice}")
			override = override || strings.Contains(k, "{overrides}")
		}
		if !counter || !override {
			t.Fatalf("%v: want a counter and the overrides under the prefix", keys)
		}
	}

	cluster := redistest.StartCluster(t, 3, 0)
	if left := useStore(t, config.Store{URL: cluster.URL(), KeyPrefix: "team-a:", OnError: "closed"}); left != 8 {
		t.Fatalf("cluster: %d left, want 8", left)
	}

	if _, err := storestack.Open(config.Store{URL: srv.URL(), KeyPrefix: "{rl}:"}); err == nil || !strings.Contains(err.Error(), "store.key_prefix") {
		t.Fatalf("a prefix with a hash tag: %v, want an error naming store.key_prefix", err)
	}
}
