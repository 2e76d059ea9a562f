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

// testConcurrency: 16 goroutines over 4 clients hammer one key with 150
// requests each (2,400, almost five times the limit) per algorithm, on
// server time. With L = B = 500 per 1000 hours nothing refills within the
// test (T = 2 hours), however slowly a loaded machine runs it, so whatever
// the interleaving exactly 500 are admitted — fewer would be a lost update,
// more a double spend. A fixed or sliding window that ends during the test
// is checked per window instead.
func testConcurrency(t *testing.T, url string) {
	const clients, perClient, calls, limit = 4, 4, 150, 500
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
			p := &sluice.Policy{Name: "hammer", Algorithm: a, Limit: limit, Period: 1000 * time.Hour}
			period := int64(p.Period / time.Microsecond)
			var mu sync.Mutex
			var requests int
			// The windows' admissions by the period their window ends in (the
			// buckets and the log put all in one).
			windows := map[int64]int64{}
			var wg sync.WaitGroup
			for g := range clients * perClient {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := stores[g%clients]
					for range calls {
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
								// sliding window's a period later): a whole period.
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
			switch {
			case len(windows) == 1:
				if total != limit {
					t.Fatalf("admitted %d, want exactly %d", total, limit)
				}
			case a == sluice.FixedWindow: // a window ended during the test
				for end, n := range windows {
					if n > limit {
						t.Fatalf("window ending at %d admitted %d > %d", end, n, limit)
					}
				}
			default: // a sliding window that ended: the weighting is approximate
				t.Logf("a window ended during the test: %v", windows)
			}
		})
	}
}
