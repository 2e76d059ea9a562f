package failover_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testwait"
)

// load is chaosWorkers goroutines deciding in a loop on a fail-over Store,
// worker w on keys[w%len(keys)], recording every call.
type load struct {
	keys      []string
	stop      atomic.Bool
	wg        sync.WaitGroup
	perWorker [][]chaosCall
	made      []atomic.Int64 // per worker: calls made
	lastRedis []atomic.Int64 // per worker: unix ns at which its latest call decided by Redis ended
}

// startLoad starts the load; t.Cleanup halts it if the test does not.
func startLoad(t *testing.T, s sluice.Store, workers int, keys ...string) *load {
	l := &load{keys: keys, perWorker: make([][]chaosCall, workers),
		made: make([]atomic.Int64, workers), lastRedis: make([]atomic.Int64, workers)}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			k := w % len(keys)
			req := sluice.Request{Policy: chaosPolicy, Key: keys[k], Cost: 1}
			var calls []chaosCall
			for !l.stop.Load() {
				start := time.Now()
				r, err := s.Decide(context.Background(), req)
				end := time.Now()
				c := chaosCall{start: start, end: end, worker: w, key: k, res: r, err: err}
				calls = append(calls, c)
				if c.byRedis() {
					l.lastRedis[w].Store(end.UnixNano())
				}
				l.made[w].Add(1)
				// A short pause: while the breaker is open a decision takes
				// microseconds, and 16 goroutines spinning would starve the
				// redis-server processes this test (and others) depend on.
				time.Sleep(time.Millisecond)
			}
			l.perWorker[w] = calls
		}()
	}
	t.Cleanup(func() { l.halt() })
	return l
}

// halt stops the load, waits for the workers and returns every call made,
// sorted by start. Only the test goroutine (or its cleanup) calls it.
func (l *load) halt() []chaosCall {
	l.stop.Store(true)
	l.wg.Wait()
	var all []chaosCall
	for _, calls := range l.perWorker {
		all = append(all, calls...)
	}
	slices.SortFunc(all, func(a, b chaosCall) int { return a.start.Compare(b.start) })
	return all
}

// keyOf is the index of worker w's key.
func (l *load) keyOf(w int) int { return w % len(l.keys) }

// waitRedis waits, for at most limit, until a call decided by Redis has
// ended after from: for any worker (all false) or for every worker (all
// true), among the workers whose key keyOK accepts (nil: all). It reports
// whether that happened; the exact times are read from the records once the
// load is halted.
func (l *load) waitRedis(from time.Time, limit time.Duration, all bool, keyOK func(int) bool) bool {
	return testwait.For(limit, func() bool {
		seen, want := 0, 0
		for w := range l.lastRedis {
			if keyOK != nil && !keyOK(l.keyOf(w)) {
				continue
			}
			want++
			if l.lastRedis[w].Load() > from.UnixNano() {
				seen++
			}
		}
		return seen > 0 && (!all || seen == want)
	})
}

// mark returns how many calls each worker has made so far, for waitCalls.
func (l *load) mark() []int64 {
	m := make([]int64, len(l.made))
	for w := range l.made {
		m[w] = l.made[w].Load()
	}
	return m
}

// waitCalls waits, for at most limit, until every worker has made n calls
// since mark, and reports whether they did: a worker that does not is stuck
// in a call.
func (l *load) waitCalls(mark []int64, n int64, limit time.Duration) bool {
	return testwait.For(limit, func() bool {
		for w := range l.made {
			if l.made[w].Load()-mark[w] < n {
				return false
			}
		}
		return true
	})
}

// backToRedis returns, among the calls that started after from and whose
// key keyOK accepts (nil: all), when the first one decided by Redis ended,
// and when every worker had had one (the latest of the workers' first); ok is
// false if some worker had none.
func backToRedis(calls []chaosCall, from time.Time, keyOK func(int) bool) (first, all time.Time, ok bool) {
	firstOf := make(map[int]time.Time)
	workers := make(map[int]bool)
	for _, c := range calls {
		if keyOK != nil && !keyOK(c.key) {
			continue
		}
		workers[c.worker] = true
		if c.byRedis() && c.start.After(from) {
			if f, seen := firstOf[c.worker]; !seen || c.end.Before(f) {
				firstOf[c.worker] = c.end
			}
		}
	}
	for _, f := range firstOf {
		if first.IsZero() || f.Before(first) {
			first = f
		}
		if f.After(all) {
			all = f
		}
	}
	return first, all, len(firstOf) > 0 && len(firstOf) == len(workers)
}

// outage is when a fault was injected into Redis and when it was healed.
type outage struct {
	faulting, faulted time.Time // before and after the fault (Kill, Pause)
	healing, healed   time.Time // before and after the cure (Restart, Resume)
}

// runOutage drives l through a fault: a moment of healthy load, fault(), at
// least a second of load against the broken Redis (and until every worker
// has made 20 calls there: a worker that cannot is stuck in a call), heal(),
// then load until every worker has been decided by Redis again, and 300ms
// more. It halts the load and returns the calls.
func runOutage(t *testing.T, l *load, fault, heal func()) (outage, []chaosCall) {
	t.Helper()
	var o outage
	started := time.Now()
	if !l.waitRedis(started, testwait.Timeout, false, nil) {
		t.Fatalf("no call was decided by Redis in the %v after the load started", testwait.Timeout)
	}
	time.Sleep(200 * time.Millisecond)
	o.faulting = time.Now()
	fault()
	o.faulted = time.Now()
	mark := l.mark()
	time.Sleep(time.Second)
	if !l.waitCalls(mark, 20, 10*time.Second) {
		t.Errorf("some worker made fewer than 20 calls in the 10 s after the fault: it is stuck in a call (calls made since: %v)", l.since(mark))
	}
	o.healing = time.Now()
	heal()
	o.healed = time.Now()
	l.waitRedis(o.healed, testwait.Timeout, true, nil) // checked on the records
	time.Sleep(300 * time.Millisecond)
	return o, l.halt()
}

// since returns how many calls each worker made since mark.
func (l *load) since(mark []int64) []int64 {
	d := l.mark()
	for w := range d {
		d[w] -= mark[w]
	}
	return d
}
