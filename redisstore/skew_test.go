package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// skewed is the system clock moved by an offset: a client whose clock is off.
type skewed struct {
	c   sluice.Clock
	off time.Duration
}

func (s skewed) Now() time.Time { return s.c.Now().Add(s.off) }

// testClockSkew shows why the scripts read Redis TIME by default. Two clients
// whose clocks are 500ms apart, deciding with their own clocks (WithClock),
// sit in different fixed windows around a boundary and together admit 2L
// within a few milliseconds. Two clients on server time share one window and
// admit L.
func testClockSkew(t *testing.T, tg rstest.Target) {
	p := &sluice.Policy{Name: "skew", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second}
	burst := func(stores ...*redisstore.Store) (admitted int64) {
		t.Helper()
		for _, s := range stores {
			for range 12 {
				r, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "k", Cost: 1})
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
				}
			}
		}
		return admitted
	}

	prefix := rstest.Prefix()
	slow := tg.New(t, redisstore.WithPrefix(prefix), redisstore.WithClock(sluice.SystemClock()))
	fast := tg.New(t, redisstore.WithPrefix(prefix), redisstore.WithClock(skewed{sluice.SystemClock(), 500 * time.Millisecond}))
	// 550-750ms into a second the slow client is late in one window and the
	// fast one early in the next, for longer than the burst takes.
	waitForFraction(t, 550*time.Millisecond, 750*time.Millisecond)
	start := time.Now()
	if got := burst(slow, fast); got != 2*p.Limit {
		t.Fatalf("skewed clocks admitted %d, want 2L = %d", got, 2*p.Limit)
	} else {
		t.Logf("clients with clocks 500ms apart admitted %d = 2L within %v", got, time.Since(start))
	}

	prefix = rstest.Prefix()
	a := tg.New(t, redisstore.WithPrefix(prefix))
	b := tg.New(t, redisstore.WithPrefix(prefix))
	waitForFraction(t, 100*time.Millisecond, 750*time.Millisecond)
	if got := burst(a, b); got != p.Limit {
		t.Fatalf("clients on server time admitted %d, want L = %d", got, p.Limit)
	}
}

// waitForFraction sleeps until the wall clock is between from and to past a
// whole second.
func waitForFraction(t *testing.T, from, to time.Duration) {
	t.Helper()
	frac := time.Duration(time.Now().UnixNano()) % time.Second
	if frac < from || frac >= to-100*time.Millisecond {
		time.Sleep((from - frac + time.Second) % time.Second)
	}
}
