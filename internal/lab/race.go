package lab

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// naiveAllow is the read-then-increment limiter — what NOT to do. It reads
// the count, compares it with the limit and writes count+1 back. Between the
// read and the write other nodes read the same count, all decide they fit,
// and all write the same count+1: admissions are lost from the count and the
// limit is exceeded. (An INCR followed by a check would count correctly; the
// point of Sluice's scripts is that the whole decision is one atomic step.)
func naiveAllow(ctx context.Context, c counter, key string, limit int64, gap func()) (bool, error) {
	n, err := c.get(ctx, key)
	if err != nil || n >= limit {
		return false, err
	}
	gap()
	return true, c.set(ctx, key, n+1)
}

// racePeriod is the window race uses, whatever Options.Period says: race is
// about atomicity, not time, so every request of a run must fall into one
// window and the bound is simply L.
const racePeriod = time.Hour

// runRace lets N goroutines — the nodes — released together by a barrier
// send L requests each against one key, for several rounds (a fresh key
// each), first through naiveAllow and then through Sluice. It is real
// concurrency, so the naive numbers vary from run to run; Sluice admits
// exactly L per round.
func runRace(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	p := &sluice.Policy{Name: "lab-race", Algorithm: sluice.FixedWindow, Limit: o.Limit, Period: racePeriod}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var st sluice.Store
	var gap func()
	if e.isRedis() {
		// Server time: make sure no hour boundary falls into the run.
		if left := racePeriod - time.Duration(time.Now().UnixNano())%racePeriod; left < 10*time.Second {
			select {
			case <-time.After(left + 100*time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		st = e.store("race", nil)
		gap = func() {} // the round trips between GET and SET are the gap
	} else {
		// Time stands still: every request falls in one window.
		st = e.store("race", newVClock(virtualStart(micros(racePeriod))))
		// In memory the GET and the SET are nanoseconds apart; yielding
		// between them stands in for the network round trip that separates
		// them on a real store.
		gap = runtime.Gosched
	}
	c := e.counter("race")

	contest := func(allow func(key string) (bool, error)) (sent, total, worst int64, err error) {
		for round := range o.Rounds {
			key := fmt.Sprintf("r%d", round)
			var admitted atomic.Int64
			var firstErr error
			var errOnce sync.Once
			barrier := make(chan struct{})
			var wg sync.WaitGroup
			for range o.Nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-barrier
					for range o.Limit {
						ok, err := allow(key)
						if err != nil {
							errOnce.Do(func() { firstErr = err })
							return
						}
						if ok {
							admitted.Add(1)
						}
					}
				}()
			}
			close(barrier)
			wg.Wait()
			if firstErr != nil {
				return 0, 0, 0, firstErr
			}
			sent += int64(o.Nodes) * o.Limit
			total += admitted.Load()
			worst = max(worst, admitted.Load())
		}
		return sent, total, worst, nil
	}

	r := &Report{Span: "one round: every request of a round is in one window; bound L"}
	sent, total, worst, err := contest(func(key string) (bool, error) {
		return naiveAllow(ctx, c, key, o.Limit, gap)
	})
	if err != nil {
		return nil, err
	}
	row := newRow(sluice.FixedWindow, "naive: GET, compare, SET", o.Nodes, sent, total, worst, o.Limit)
	row.Naive = true
	r.Rows = append(r.Rows, row)
	sent, total, worst, err = contest(func(key string) (bool, error) { return decide(ctx, st, p, key) })
	if err != nil {
		return nil, err
	}
	r.Rows = append(r.Rows, newRow(sluice.FixedWindow, "sluice: atomic decision", o.Nodes, sent, total, worst, o.Limit))
	r.Summary = fmt.Sprintf("%d nodes racing a read-then-write counter admitted up to %.2f× the limit in a round (%d rounds); Sluice's atomic decision admitted at most %.2f×.",
		o.Nodes, r.Rows[0].Overshoot, o.Rounds, r.Rows[1].Overshoot)
	return r, nil
}
