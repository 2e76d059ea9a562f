package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
	"github.com/sluicehq/sluice/storetest"
)

// testCoalescing: 64 goroutines deciding on one key at one instant share
// calls, and every caller still gets what it would have got alone in some
// order: exactly the limit is admitted, the admitted see each remaining count
// (and a leaky bucket each delay) once, the denied see none left.
func testCoalescing(t *testing.T, c rueidis.Client) {
	const goroutines, each, limit = 64, 4, 100
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			r := &counting{Runner: redisstore.NewRunner(c), runs: map[string]int{}}
			clock := storetest.NewClock(storetest.Epoch)
			s := redisstore.NewWithRunner(r, append(rstest.Defaults(), redisstore.WithClock(clock))...)
			p := &sluice.Policy{Name: "hot", Algorithm: a, Limit: limit, Period: time.Minute}
			var mu sync.Mutex
			var admitted []sluice.Result
			denied := 0
			var wg sync.WaitGroup
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						res, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "k", Cost: 1})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if res.Allowed {
							admitted = append(admitted, res)
						} else if denied++; res.Remaining != 0 || res.RetryAfter <= 0 {
							t.Errorf("denied with %+v", res)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(admitted) != limit || denied != goroutines*each-limit {
				t.Fatalf("%d admitted, %d denied; want %d and %d", len(admitted), denied, limit, goroutines*each-limit)
			}
			// The group's state was written, with its expiry: a peek finds
			// the limit used up.
			if peek, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "k"}); err != nil || peek.Remaining != 0 {
				t.Errorf("peek after the burst: %+v, %v; want 0 remaining", peek, err)
			}
			if at, err := c.Do(context.Background(), c.B().Pexpiretime().Key(s.Key(p, "k")).Build()).AsInt64(); err != nil || at <= 0 {
				t.Errorf("PEXPIRETIME of the hot key: %d, %v; want an expiry", at, err)
			}
			var remaining, delays []int64
			for _, res := range admitted {
				remaining = append(remaining, res.Remaining)
				delays = append(delays, int64(res.Delay/p.EmissionInterval()))
			}
			slices.Sort(remaining)
			slices.Sort(delays)
			for i := range int64(limit) {
				if remaining[i] != i {
					t.Fatalf("remaining counts seen by the admitted: %v; want 0 to %d once each", remaining, limit-1)
				}
				if a == sluice.LeakyBucket && delays[i] != i {
					t.Fatalf("leaky bucket delays in T: %v; want 0 to %d once each", delays, limit-1)
				}
			}
			calls := 0
			for _, n := range r.runs {
				calls += n
			}
			if calls >= goroutines*each {
				t.Errorf("%d script calls for %d decisions on one key: none shared", calls, goroutines*each)
			}
			t.Logf("%d script calls for %d decisions (%.2f per decision): %v", calls, goroutines*each, float64(calls)/float64(goroutines*each), r.runs)
		})
	}
}

// TestCoalescingDeadlines: with Redis frozen (SIGSTOP), a Decide queued
// behind the call in flight returns when its own context ends, and a Decide
// queued after it is not failed by that earlier deadline: its group runs
// until the latest of its members' deadlines and succeeds once Redis thaws.
func TestCoalescingDeadlines(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.Open(srv.URL(), redisstore.WithTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &sluice.Policy{Name: "frozen", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute}
	req := sluice.Request{Policy: p, Key: "k", Cost: 1}
	if _, err := s.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	type outcome struct {
		err  error
		took time.Duration
	}
	decide := func(d time.Duration) chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			start := time.Now()
			_, err := s.Decide(ctx, req)
			ch <- outcome{err, time.Since(start)}
		}()
		return ch
	}
	first := decide(time.Minute) // in flight on the frozen server
	// Pauses to let each call queue in order; the assertions hold in any
	// order, the order only makes them exercise the queue.
	waitQueued := func() { time.Sleep(50 * time.Millisecond) }
	waitQueued()
	short := decide(200 * time.Millisecond)
	waitQueued()
	long := decide(time.Minute)
	o := <-short
	if !errors.Is(o.err, context.DeadlineExceeded) || o.took > 20*time.Second {
		t.Fatalf("the queued Decide with a 200ms deadline: %v after %v; want its own deadline, not the call before it", o.err, o.took)
	}
	srv.Resume()
	for name, ch := range map[string]chan outcome{"first": first, "last": long} {
		if o := <-ch; o.err != nil {
			t.Errorf("the %s Decide, a minute to go, failed once Redis thawed: %v", name, o.err)
		}
	}
}
