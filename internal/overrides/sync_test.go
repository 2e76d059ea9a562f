package overrides

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/storetest"
)

// TestRedisSyncFollowsChanges: random changes through one node (sets,
// removals, expiries passing, expired ones dropped), read by another at
// random points, by what changed when it is a few changes behind and whole
// when the change log no longer reaches back: after each read it enforces
// exactly what a node started then reads.
func TestRedisSyncFollowsChanges(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(t0)
	a := boundedStore(t, srv, clock, MaxPerPolicy, MaxTotal, 2)
	b := redisStore(t, srv, WithClock(clock))
	for _, s := range []*Store{a, b} {
		s.b.(*redisBackend).logLen = 8
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	other := base
	other.Name = "other"
	policies := []sluice.Policy{base, other}
	target := func() Override {
		name := "t" + strconv.Itoa(rng.IntN(4))
		if rng.IntN(2) == 0 {
			return Override{Key: name}
		}
		return Override{Prefix: name + ":"}
	}
	for step := range 300 {
		switch r := rng.IntN(10); {
		case r < 5:
			o := target()
			o.Limit, o.Period = 1+rng.Int64N(100), time.Second
			if rng.IntN(2) == 0 {
				o.ExpiresAt = clock.Now().Add(time.Duration(1+rng.IntN(20)) * time.Second)
			}
			if _, err := a.Put(ctx, policies[rng.IntN(2)], o); err != nil {
				t.Fatal(err)
			}
		case r < 7:
			o := target()
			if err := a.Delete(ctx, policies[rng.IntN(2)].Name, o.Target()); err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
		case r < 8:
			clock.Advance(time.Duration(rng.IntN(10)) * time.Second)
		default:
			poll(t, b)
			fresh := redisStore(t, srv, WithClock(clock))
			poll(t, fresh)
			if got, want := listed(b), listed(fresh); !slices.Equal(got, want) {
				t.Fatalf("step %d: the node enforces %q, a node started now %q", step, got, want)
			}
			fresh.Close()
		}
	}
	deltas := testutil.ToFloat64(b.reads.WithLabelValues("delta"))
	fulls := testutil.ToFloat64(b.reads.WithLabelValues("full"))
	if deltas < 5 || fulls < 5 {
		t.Errorf("the node read %v deltas and %v full copies, want both kinds tested", deltas, fulls)
	}
}

// TestRedisReplicaPromoted: Redis goes back to a replica's older copy of the
// overrides (a fail-over to a replica that had not every change): the same
// epoch, a lower version. One poll brings the nodes to what Redis holds,
// also when Redis has meanwhile made as many changes again (the same
// version, other changes) or more.
func TestRedisReplicaPromoted(t *testing.T) {
	for name, more := range map[string]int{"older": 0, "as many again": 3, "more": 5} {
		t.Run(name, func(t *testing.T) {
			// Full syncs at once, not after the default 5 s diskless delay.
			quick := redistest.WithArgs("--repl-diskless-sync-delay", "0")
			primary := redistest.Start(t, quick)
			replica := redistest.Start(t, quick, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
			ctx := context.Background()
			a, b := redisStore(t, primary), redisStore(t, primary)
			prime(t, a, b)
			caughtUp(t, replica, primary)
			redisDo(t, replica, "REPLICAOF", "NO", "ONE")
			for i := range 3 {
				if _, err := a.Put(ctx, base, Override{Key: "lost" + itoa(i), Limit: 9, Period: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			poll(t, a, b)

			// The primary takes the replica's copy, as if the replica had
			// been promoted in its place.
			redisDo(t, primary, "REPLICAOF", "127.0.0.1", strconv.Itoa(replica.Port()))
			caughtUp(t, primary, replica)
			redisDo(t, primary, "REPLICAOF", "NO", "ONE")
			c := redisStore(t, primary)
			for i := range more {
				if _, err := c.Put(ctx, base, Override{Key: "after" + itoa(i), Limit: 7, Period: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			want := listed(c)
			if slices.ContainsFunc(want, func(s string) bool { return strings.Contains(s, "lost") }) {
				t.Fatalf("the copy taken holds the later changes: %q", want)
			}
			afterLoss(t, on(primary), a, b, want)
		})
	}
}

// caughtUp waits until replica is linked to its primary and holds the same
// overrides history.
func caughtUp(t *testing.T, replica, primary *redistest.Server) {
	t.Helper()
	key := DefaultRedisPrefix + "overrides"
	testwait.UntilSaw(t, "the replica caught up", func() (bool, string) {
		info := redisDo(t, replica, "INFO", "replication")
		return strings.Contains(info, "master_link_status:up") &&
			redisDo(t, replica, "HGET", key, "!head") == redisDo(t, primary, "HGET", key, "!head"), "\n" + info
	})
}
