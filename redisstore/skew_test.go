package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
	"github.com/sluicehq/sluice/storetest"
)

// testClockSkew shows why the scripts read Redis TIME by default. Two clients
// whose clocks are 500ms apart, deciding with their own clocks (WithClock),
// sit in different fixed windows around a boundary and together admit 2L
// at what is one instant. Two clients on server time share one window and
// admit L.
func testClockSkew(t *testing.T, tg rstest.Target) {
	burst := func(p *sluice.Policy, stores ...*redisstore.Store) (admitted int64) {
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

	// The client clocks stand still 700ms into a second and 500ms later:
	// the slow client late in one window, the fast one early in the next,
	// however long the burst takes.
	p := &sluice.Policy{Name: "skew", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second}
	prefix := rstest.Prefix()
	at := storetest.Epoch.Add(700 * time.Millisecond)
	slow := tg.New(t, redisstore.WithPrefix(prefix), redisstore.WithClock(storetest.NewClock(at)))
	fast := tg.New(t, redisstore.WithPrefix(prefix), redisstore.WithClock(storetest.NewClock(at.Add(500*time.Millisecond))))
	if got := burst(p, slow, fast); got != 2*p.Limit {
		t.Fatalf("skewed clocks admitted %d, want 2L = %d", got, 2*p.Limit)
	}

	// On server time both share the server's window. An hour-long window
	// makes a burst that straddles its edge, on a machine however slow, a
	// 1-in-thousands event; should it happen, the burst is repeated.
	hourly := &sluice.Policy{Name: "skew-hourly", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour}
	for try := 0; ; try++ {
		prefix = rstest.Prefix()
		a := tg.New(t, redisstore.WithPrefix(prefix))
		b := tg.New(t, redisstore.WithPrefix(prefix))
		hour := time.Now().Truncate(time.Hour)
		got := burst(hourly, a, b)
		if !time.Now().Truncate(time.Hour).Equal(hour) && try == 0 {
			continue
		}
		if got != hourly.Limit {
			t.Fatalf("clients on server time admitted %d, want L = %d", got, hourly.Limit)
		}
		break
	}
}
