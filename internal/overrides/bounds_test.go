package overrides

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/storetest"
)

// boundedStore is a Redis Store with small bounds, so that tests reach them
// in a few changes.
func boundedStore(t *testing.T, srv *redistest.Server, clock sluice.Clock, perPolicy, total, purge int) *Store {
	t.Helper()
	s := redisStore(t, srv, WithClock(clock))
	rb := s.b.(*redisBackend)
	rb.maxPerPolicy, rb.maxTotal, rb.purgeMax = perPolicy, total, purge
	return s
}

// TestRedisBoundsCountOnlyInForce: expired overrides, of this policy or any
// other, do not count against the bounds however many of them Redis still
// holds (none is dropped here), and an expired one set again counts as one
// more in force.
func TestRedisBoundsCountOnlyInForce(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(t0)
	s := boundedStore(t, srv, clock, 3, 5, 0)
	ctx := context.Background()
	other := base
	other.Name = "other"
	put := func(p sluice.Policy, key string, expires time.Time) error {
		_, err := s.Put(ctx, p, Override{Key: key, Limit: 1, Period: time.Second, ExpiresAt: expires})
		return err
	}
	soon := t0.Add(time.Minute)
	for i := range 5 {
		p := other
		if i >= 3 {
			p.Name = "third"
		}
		if err := put(p, "x"+strconv.Itoa(i), soon); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(base, "a", time.Time{}); !errors.Is(err, ErrFull) {
		t.Fatalf("a sixth override with five in force: %v, want ErrFull", err)
	}

	clock.Set(soon) // the five expire, and stay in Redis
	if err := put(base, "a", soon.Add(time.Minute)); err != nil {
		t.Fatalf("with none in force (five expired of other policies): %v", err)
	}
	for _, key := range []string{"b", "c"} {
		if err := put(base, key, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(base, "d", time.Time{}); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "a policy") {
		t.Fatalf("a fourth in force on one policy: %v, want the per-policy bound", err)
	}
	clock.Set(soon.Add(time.Minute)) // a expires
	if err := put(base, "d", time.Time{}); err != nil {
		t.Fatalf("a third in force beside an expired one: %v", err)
	}
	if err := put(base, "a", time.Time{}); !errors.Is(err, ErrFull) {
		t.Fatalf("an expired override set again with three in force: %v, want ErrFull", err)
	}
	for _, key := range []string{"y", "z"} {
		if err := put(other, key, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(other, "w", time.Time{}); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "in all") {
		t.Fatalf("a sixth in force: %v, want the total bound", err)
	}
	if err := put(base, "b", time.Time{}); err != nil {
		t.Errorf("replacing one in force at the bound: %v", err)
	}
	if err := s.Delete(ctx, "api", "k:a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting an expired override: %v, want ErrNotFound", err)
	}
	if n := hashLen(t, srv); n != 13 {
		t.Errorf("Redis holds %d fields, want 13 (10 overrides, 5 of them expired, and 3 of the history)", n)
	}
}

// TestRedisPurgesExpired: each change drops a few expired overrides, and
// the nodes drop them with it.
func TestRedisPurgesExpired(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(t0)
	s := boundedStore(t, srv, clock, MaxPerPolicy, MaxTotal, 2)
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.Put(ctx, base, Override{Key: itoa(i), Limit: 1, Period: time.Second, ExpiresAt: t0.Add(time.Duration(i+1) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(t0.Add(time.Hour))
	for i, want := range []int64{3 + 3 + 1, 3 + 1 + 1, 3 + 0 + 1} {
		if _, err := s.Put(ctx, base, Override{Key: "k", Limit: 1, Period: time.Second}); err != nil {
			t.Fatal(err)
		}
		if n := hashLen(t, srv); n != want {
			t.Errorf("after change %d Redis holds %d fields, want %d", i, n, want)
		}
	}
	fresh := redisStore(t, srv, WithClock(clock))
	if err := fresh.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listed(fresh); len(got) != 1 || len(listed(s)) != 1 {
		t.Errorf("a new node reads %q, the node that changed them %q; want only k", got, listed(s))
	}
}

// hashLen is how many fields the overrides hash holds.
func hashLen(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	n, err := strconv.ParseInt(redisDo(t, srv, "HLEN", DefaultRedisPrefix+"overrides"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
