package overrides

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedisChangeCostIsFlat: what a change costs Redis (the change, and
// another node reading it) does not grow with the overrides held. It is
// measured in bytes Redis sends, which reading every override would
// multiply, and which do not depend on the machine's speed.
func TestRedisChangeCostIsFlat(t *testing.T) {
	srv := redistest.Start(t)
	a, b := redisStore(t, srv), redisStore(t, srv)
	ctx := context.Background()
	const changes = 20
	perChange := func() float64 {
		before := netOut(t, srv)
		for i := range changes {
			if _, err := a.Put(ctx, base, Override{Key: "probe", Limit: int64(1 + i), Period: time.Hour}); err != nil {
				t.Fatal(err)
			}
			poll(t, b)
		}
		return float64(netOut(t, srv)-before) / changes
	}
	perChange() // scripts loaded, both nodes current
	few := perChange()
	fill(t, a, 2400)
	poll(t, b)
	many := perChange()
	t.Logf("bytes sent by Redis per change: %.0f with 1 override, %.0f with 2,401", few, many)
	if many > 1.5*few {
		t.Errorf("a change costs %.0f bytes of replies with 2,401 overrides, %.0f with 1: it grows with the overrides", many, few)
	}
}

// fill sets n overrides through s, over policies of at most 800.
func fill(t *testing.T, s *Store, n int) {
	t.Helper()
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			var err error
			for i := w; i < n && err == nil; i += 4 {
				p := base
				p.Name = "fill" + itoa(i/800)
				_, err = s.Put(context.Background(), p, Override{Key: itoa(i), Limit: 5, Period: time.Hour})
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// netOut is how many bytes srv has sent to its clients.
func netOut(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	for _, line := range strings.Split(redisDo(t, srv, "INFO", "stats"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_net_output_bytes:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no total_net_output_bytes in INFO stats")
	return 0
}
