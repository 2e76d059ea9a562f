package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// placement returns a ShardedRunner over n named shards without clients:
// placement never touches them.
func placement(t testing.TB, n int) *redisstore.ShardedRunner {
	shards := make([]redisstore.Shard, n)
	for i := range shards {
		shards[i] = redisstore.Shard{Name: fmt.Sprintf("10.0.0.%d:6379", i+1)}
	}
	r, err := redisstore.NewShardedRunner(shards...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestShardPlacement: keys spread evenly, and adding a shard to N moves
// about 1/(N+1) of them — all to the new shard.
func TestShardPlacement(t *testing.T) {
	const keys = 100_000
	for n := 1; n <= 7; n++ {
		before, after := placement(t, n), placement(t, n+1)
		moved, load := 0, make([]int, n+1)
		for i := range keys {
			k := fmt.Sprintf("sluice:api:user-%d", i)
			a, b := before.ShardOf(k), after.ShardOf(k)
			load[b]++
			if a != b {
				moved++
				if b != n {
					t.Fatalf("N=%d: key %q moved from shard %d to old shard %d", n, k, a, b)
				}
			}
		}
		want := 1 / float64(n+1)
		if got := float64(moved) / keys; math.Abs(got-want) > 0.1*want {
			t.Errorf("adding shard %d moved %.4f of the keys, want %.4f±10%%", n+1, got, want)
		}
		for i, l := range load {
			if got := float64(l) / keys; math.Abs(got-want) > 0.1*want {
				t.Errorf("N=%d: shard %d holds %.4f of the keys, want %.4f±10%%", n+1, i, got, want)
			}
		}
	}
}

func TestShardedRunnerRefuses(t *testing.T) {
	if _, err := redisstore.NewShardedRunner(); err == nil {
		t.Error("no shards: no error")
	}
	if _, err := redisstore.NewShardedRunner(redisstore.Shard{Name: "a"}, redisstore.Shard{Name: "a"}); err == nil {
		t.Error("a shard given twice: no error")
	}
}

func TestShardURLs(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string // nil: an error
	}{
		{"redis://a:6379", []string{"redis://a:6379"}},
		{"redis://a:6379?addr=b:6379", []string{"redis://a:6379?addr=b:6379"}},
		{"redis://a:6379?shard=redis://b:6379&shard=redis://c:6379", []string{"redis://a:6379", "redis://b:6379", "redis://c:6379"}},
		{"redis://a:6379?db=2&shard=redis://b:6379/3", []string{"redis://a:6379?db=2", "redis://b:6379/3"}},
		{"redis://:pw@a:6379?shard=" + escape("rediss://u:p@b:6380?skip_verify=true"), []string{"redis://:pw@a:6379", "rediss://u:p@b:6380?skip_verify=true"}},
		{"redis://a:6379?shard=redis://a:6379", nil},                    // the same server twice
		{"redis://:x@a:6379?shard=rediss://:y@a:6379", nil},             // still the same server
		{"redis://a:6379?shard=http://b:6379", nil},                     // not Redis
		{"redis://a:6379?shard=" + escape("redis://b:1?addr=c:1"), nil}, // a Cluster as a shard
		{"redis://a:6379?addr=c:1&shard=redis://b:1", nil},
		{"redis://a:6379?shard=", nil},
		{"redis://a:6379?shard=%zz", nil},
	} {
		got, err := redisstore.ShardURLs(tc.url)
		if tc.want == nil {
			if err == nil {
				t.Errorf("ShardURLs(%q) = %q, want an error", tc.url, got)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("ShardURLs(%q) = %q, %v; want %q", tc.url, got, err, tc.want)
		}
	}
}

func escape(s string) string {
	return strings.NewReplacer("&", "%26", "?", "%3F", "=", "%3D").Replace(s)
}

// FuzzShardURLs: any input gives an error or shard URLs that each parse, are
// one server each, and are distinct; a URL without shards comes back alone.
func FuzzShardURLs(f *testing.F) {
	for _, s := range []string{
		"redis://a:6379", "redis://a:1?shard=redis://b:2&shard=redis://c:3", "redis://a:1?shard=redis://a:1",
		"unix:///tmp/r.sock?shard=unix:///tmp/s.sock", "redis://a:1?shard=%zz", "redis://a:1?db=1&shard=redis://a:1?db=2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		urls, err := redisstore.ShardURLs(raw)
		if err != nil {
			return
		}
		if len(urls) == 0 {
			t.Fatal("no URLs and no error")
		}
		if len(urls) == 1 {
			return // not sharded: Open parses it as before
		}
		names := map[string]bool{}
		for _, u := range urls {
			if _, err := rueidis.ParseURL(u); err != nil {
				t.Fatalf("shard URL %q does not parse: %v", u, err)
			}
			if names[u] {
				t.Fatalf("shard URL %q twice", u)
			}
			names[u] = true
		}
	})
}

// shardedTarget is the rstest Target of a store sharded over servers.
func shardedTarget(servers []*redistest.Server, clients []rueidis.Client) rstest.Target {
	ctx := context.Background()
	return rstest.Target{
		New: func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
			shards := make([]redisstore.Shard, len(clients))
			for i, c := range clients {
				shards[i] = redisstore.Shard{Name: servers[i].Addr(), Runner: redisstore.NewRunner(c)}
			}
			r, err := redisstore.NewShardedRunner(shards...)
			if err != nil {
				t.Fatal(err)
			}
			return redisstore.NewWithRunner(r, append(rstest.Defaults(), opts...)...)
		},
		ExpireTime: func(t *testing.T, key string) int64 {
			found := int64(-2)
			for i, c := range clients {
				when, err := c.Do(ctx, c.B().Pexpiretime().Key(key).Build()).AsInt64()
				if err != nil {
					t.Fatalf("PEXPIRETIME %q on shard %d: %v", key, i, err)
				}
				if when != -2 {
					if found != -2 {
						t.Errorf("key %q on two shards", key)
					}
					found = when
				}
			}
			return found
		},
		FlushScripts: func(t *testing.T) {
			for i, c := range clients {
				for _, cmd := range []rueidis.Completed{c.B().ScriptFlush().Build(), c.B().FunctionFlush().Build()} {
					if err := c.Do(ctx, cmd).Error(); err != nil {
						t.Errorf("flush on shard %d: %v", i, err)
					}
				}
			}
		},
	}
}

// TestSharded runs the conformance suite on a store sharded over three
// independent Redis servers, where all-or-nothing checks over keys on
// several shards take the cross-slot path.
func TestSharded(t *testing.T) {
	servers := make([]*redistest.Server, 3)
	clients := make([]rueidis.Client, 3)
	for i := range servers {
		servers[i] = redistest.Start(t)
		clients[i] = newClient(t, servers[i].URL())
	}
	tg := shardedTarget(servers, clients)
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
	t.Run("Differential", func(t *testing.T) { rstest.Differential(t, tg, 600, false) })
	t.Run("NoScript", func(t *testing.T) { rstest.NoScript(t, tg) })
	t.Run("CrossShardRace", func(t *testing.T) { rstest.CrossSlotRace(t, tg) })
	t.Run("Batch", func(t *testing.T) { testBatch(t, tg.New, false, false) })
	t.Run("LargeSet", func(t *testing.T) { testLargeSet(t, tg.New) })
	t.Run("Open", func(t *testing.T) { testOpenSharded(t, servers) })
}

// testOpenSharded: Open on a sharded URL puts every key on the server
// ShardOf names, the keys spread over all three, and a set across shards
// is all-or-nothing.
func testOpenSharded(t *testing.T, servers []*redistest.Server) {
	url := servers[0].URL() + "?shard=" + servers[1].URL() + "&shard=" + servers[2].URL()
	prefix := rstest.Prefix()
	s, err := redisstore.Open(url, redisstore.WithPrefix(prefix), redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
	perServer := make([]int, len(servers))
	for i := range 60 {
		key := fmt.Sprint("k", i)
		if _, err := s.Decide(ctx, sluice.Request{Policy: p, Key: key, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		on := -1
		for j, srv := range servers {
			if n, err := srv.Do("EXISTS", s.Key(p, key)); err != nil {
				t.Fatal(err)
			} else if strings.TrimSpace(n) == "1" {
				if on >= 0 {
					t.Fatalf("key %q on servers %d and %d", key, on, j)
				}
				on = j
			}
		}
		if on < 0 {
			t.Fatalf("key %q on no server", key)
		}
		perServer[on]++
	}
	for j, n := range perServer {
		if n < 5 {
			t.Errorf("server %d holds %d of 60 keys: %v", j, n, perServer)
		}
	}
	// k0..k59 are spent (limit 1); a set of a fresh key and a spent one on
	// another shard is denied whole, leaving the fresh key untouched.
	fresh := "fresh"
	for i := range 60 {
		spent := fmt.Sprint("k", i)
		res := make([]sluice.Result, 2)
		err := s.DecideAll(ctx, []sluice.Request{{Policy: p, Key: fresh, Cost: 1}, {Policy: p, Key: spent, Cost: 1}}, res)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed || res[1].Allowed {
			t.Fatalf("set with spent key %q admitted: %+v", spent, res)
		}
	}
	if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: fresh, Cost: 1}); err != nil || !r.Allowed {
		t.Fatalf("fresh key after denied sets: %+v, %v", r, err)
	}
}

// TestShardNodesWithin: a shard that names nodes of its own (a Cluster, or
// a sharded store as a routed store's route may be) keeps a breaker per
// node: NodeOf names the node within it, not the shard as a whole.
func TestShardNodesWithin(t *testing.T) {
	inner := placement(t, 3)
	outer, err := redisstore.NewShardedRunner(redisstore.Shard{Name: "a", Runner: inner}, redisstore.Shard{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	s := redisstore.NewWithRunner(outer)
	p := &sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	seen := map[string]bool{}
	for i := range 200 {
		key := fmt.Sprint("k", i)
		node := s.NodeOf(p, key)
		if s.ShardOf(p, key) == 1 {
			if node != "b" {
				t.Fatalf("key %q on shard b named %q", key, node)
			}
			continue
		}
		if want := fmt.Sprintf("10.0.0.%d:6379", inner.ShardOf(s.Key(p, key))+1); node != want {
			t.Fatalf("key %q named %q, want %q within shard a", key, node, want)
		}
		seen[node] = true
	}
	if len(seen) != 3 {
		t.Fatalf("nodes within shard a: %v", seen)
	}
}
