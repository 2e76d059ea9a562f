package redisstore_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// testPaths checks which way each call goes: one script per lone Decide;
// one batch script for DecideAll on one node or one slot; on a Cluster with keys in
// several slots, a dry run and a reservation per key, each its key's script
// alone (the queues are idle: nothing else to share a call with).
func testPaths(t *testing.T, c rueidis.Client, cluster bool) {
	ctx := context.Background()
	user := &sluice.Policy{Name: "user", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}
	global := &sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second}
	reqs := []sluice.Request{{Policy: user, Key: "alice", Cost: 1}, {Policy: global, Key: "all", Cost: 1}}
	for _, prefix := range []string{rstest.Prefix(), "{tag}:" + rstest.Prefix()} {
		r := &counting{Runner: redisstore.NewRunner(c), runs: map[string]int{}}
		s := redisstore.NewWithRunner(r, redisstore.WithPrefix(prefix), redisstore.WithTimeout(5*time.Second))
		spread := redisstore.Slot(s.Key(user, "alice")) != redisstore.Slot(s.Key(global, "all"))
		if prefix[0] != '{' && !spread {
			t.Fatalf("the keys %q and %q share a slot; pick others", s.Key(user, "alice"), s.Key(global, "all"))
		}
		results := make([]sluice.Result, len(reqs))
		if err := s.DecideAll(ctx, reqs, results); err != nil || !results[0].Allowed || !results[1].Allowed {
			t.Fatalf("prefix %q: DecideAll: %+v, %v", prefix, results, err)
		}
		if cluster && spread {
			if r.multi != 0 || r.runs["gcra"] != 2 || r.runs["fixed_window"] != 2 || len(r.runs) != 2 {
				t.Errorf("prefix %q, keys in two slots: %d RunMulti and runs %v, want a dry run and one reservation each", prefix, r.multi, r.runs)
			}
		} else if r.multi != 0 || r.runs["batch"] != 1 || len(r.runs) != 1 {
			t.Errorf("prefix %q on one node: %d RunMulti and runs %v, want the batch script once", prefix, r.multi, r.runs)
		}
		if _, err := s.Decide(ctx, reqs[0]); err != nil || r.runs["gcra"] != 1+2*btoi(cluster && spread) {
			t.Errorf("Decide: %v, runs %v: want one gcra script", err, r.runs)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// testSlots compares Slot with the Cluster's CLUSTER KEYSLOT.
func testSlots(t *testing.T, c rueidis.Client) {
	ctx := context.Background()
	p := &sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	s := redisstore.New(c, redisstore.WithTimeout(5*time.Second))
	keys := []string{"", "foo", "bar", "123456789", "{user1000}.following", "{user1000}.followers",
		"a{b}c", "{}x", "x{}", "}{", "{a}{b}", "{{a}}", "ключ\x00\xff",
		s.Key(p, "alice"), s.Key(p, "a{b}"), s.Key(p, "}{"), s.Key(p, "%7B")}
	rng := rand.New(rand.NewPCG(16384, 1))
	for range 200 {
		k := randomKey(rng)
		keys = append(keys, k, s.Key(p, k))
	}
	for _, k := range keys {
		want, err := c.Do(ctx, c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := redisstore.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

// testOpen: Open parses the URL and owns its client; New leaves the caller's.
func testOpen(t *testing.T, url string) {
	ctx := context.Background()
	p := &sluice.Policy{Name: "open", Algorithm: sluice.SlidingWindow, Limit: 2, Period: time.Minute}
	s, err := redisstore.Open(url, rstest.Defaults()...)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 2}); err != nil || !r.Allowed {
		t.Fatalf("Decide on an opened store: %+v, %v", r, err)
	}
	if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1}); err != nil || r.Allowed {
		t.Fatalf("third unit: %+v, %v: want denied", r, err)
	}
	s.Close()
	// rueidis' cluster client closes its connections in the background.
	testwait.Until(t, "Decide failing after Close (closing the client Open made)", func() bool {
		_, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1})
		return err != nil
	})

	c := newClient(t, url)
	redisstore.New(c).Close()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("the caller's client after Store.Close: %v", err)
	}

	if _, err := redisstore.Open("ftp://127.0.0.1:1"); err == nil {
		t.Error("Open accepted an ftp:// URL")
	}
}

// TestOpenTLSAndUnix opens rediss:// and unix:// URLs.
func TestOpenTLSAndUnix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &sluice.Policy{Name: "open", Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute}
	dir := t.TempDir()
	cert, key, ca := redistest.GenerateTLS(t, dir)
	tlsSrv := redistest.Start(t, redistest.WithTLS(cert, key, ca))
	sock := filepath.Join(dir, "redis.sock")
	unixSrv := redistest.Start(t, redistest.WithArgs("--unixsocket", sock, "--unixsocketperm", "700"))
	_ = unixSrv
	for _, url := range []string{
		// The test CA is not in the system pool; the certificate is not what
		// is under test here.
		tlsSrv.URL() + "?skip_verify=true",
		"unix://" + sock,
	} {
		s, err := redisstore.Open(url, rstest.Defaults()...)
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1})
		s.Close()
		if err != nil || !r.Allowed {
			t.Fatalf("%s: Decide: %+v, %v", url, r, err)
		}
	}
}
