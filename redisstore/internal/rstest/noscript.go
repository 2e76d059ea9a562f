package rstest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// NoScript runs decisions, single and batched, from several goroutines while
// SCRIPT FLUSH empties every node's script cache several times: EVALSHA then
// meets NOSCRIPT, and the fallback to EVAL must hide it — zero errors.
func NoScript(t *testing.T, tg Target) {
	s := tg.New(t)
	var pols []*sluice.Policy
	for _, a := range sluice.Algorithms {
		pols = append(pols, &sluice.Policy{Name: "ns-" + string(a), Algorithm: a, Limit: 1000, Period: time.Minute})
	}
	keys := []string{"a", "b", "c", "d"}
	var stop atomic.Bool
	var decisions, failures atomic.Int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; !stop.Load() && i < 100000; i++ {
				p := pols[(g+i)%len(pols)]
				var err error
				if i%3 == 0 {
					reqs := []sluice.Request{
						{Policy: p, Key: keys[i%len(keys)], Cost: 1},
						{Policy: pols[(g+i+1)%len(pols)], Key: keys[(i+1)%len(keys)], Cost: 1},
					}
					err = s.DecideAll(ctx, reqs, make([]sluice.Result, len(reqs)))
				} else {
					_, err = s.Decide(ctx, sluice.Request{Policy: p, Key: keys[i%len(keys)], Cost: 1})
				}
				decisions.Add(1)
				if err != nil && failures.Add(1) <= 5 {
					t.Errorf("goroutine %d decision %d: %v", g, i, err)
				}
			}
		}()
	}
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		tg.FlushScripts(t)
	}
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d of %d decisions failed across SCRIPT FLUSH", failures.Load(), decisions.Load())
	}
	t.Logf("%d decisions across 5 SCRIPT FLUSHes, no error", decisions.Load())
}
