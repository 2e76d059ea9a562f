package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// testConcurrency: 16 goroutines over 4 clients hammer one key for 2s per
// algorithm, on server time. With L = B = 500 per hour nothing refills within
// the test (T = 7.2s), so whatever the interleaving exactly 500 are admitted
// — fewer would be a lost update, more a double spend. A fixed or sliding
// window whose hour ends during the test is checked per window instead.
func testConcurrency(t *testing.T, url string) {
	const clients, perClient, limit = 4, 4, 500
	prefix := rstest.Prefix()
	stores := make([]*redisstore.Store, clients)
	for i := range stores {
		s, err := redisstore.Open(url, redisstore.WithPrefix(prefix), redisstore.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			p := &sluice.Policy{Name: "hammer", Algorithm: a, Limit: limit, Period: time.Hour}
			period := int64(time.Hour / time.Microsecond)
			deadline := time.Now().Add(2 * time.Second)
			var mu sync.Mutex
			var requests int
			// The windows' admissions by the hour their window ends (the buckets
			// and the log put all in one).
			windows := map[int64]int64{}
			var wg sync.WaitGroup
			for g := range clients * perClient {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := stores[g%clients]
					for time.Now().Before(deadline) {
						r, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "hot", Cost: 1})
						at := time.Now().UnixMicro()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						requests++
						if r.Allowed {
							var end int64
							if a == sluice.FixedWindow || a == sluice.SlidingWindow {
								// A window ends ResetAfter after the decision (a
								// sliding window's a period later): an exact hour.
								end = (at + r.ResetAfter.Microseconds() + period/2) / period
							}
							windows[end]++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			var total int64
			for _, n := range windows {
				total += n
			}
			t.Logf("%d requests, %d admitted", requests, total)
			if requests < 4*limit {
				t.Fatalf("only %d requests in 2s: too few to exhaust the limit", requests)
			}
			switch {
			case len(windows) == 1:
				if total != limit {
					t.Fatalf("admitted %d, want exactly %d", total, limit)
				}
			case a == sluice.FixedWindow: // the hour turned during the test
				for end, n := range windows {
					if n > limit {
						t.Fatalf("window ending at %d admitted %d > %d", end, n, limit)
					}
				}
			default: // a sliding window whose hour turned: the weighting is approximate
				t.Logf("the hour turned during the test: %v", windows)
			}
		})
	}
}
