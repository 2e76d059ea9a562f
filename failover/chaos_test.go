package failover_test

// Chaos tests (issue 6): real redis-server processes killed, frozen,
// restarted and failed over under concurrent load, checking that every call
// returns within the timeout (plus a margin for a loaded machine) with the
// answer the fail policy documents, and that decisions go back to Redis soon
// after it is back. See chaos_helpers_test.go for the load and the checks.
//
// The fail-over Stores here use WithTimeout(50ms) and WithBreaker(3, 250ms):
// recovery within 2 s of Redis' return needs a cool-down well below 2 s (the
// default, 1 s, would fit too, but leaves little room on a loaded machine).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/redisstore"
)

// TestChaosKill kills redis-server (SIGKILL) under load, once per fail
// policy: every call is answered within the timeout + margin as the policy
// says, the breaker opens, nothing is decided by Redis while it is dead, and
// within 2 s of Restart every worker is decided by Redis again, with the
// state in Redis (which restarted empty).
func TestChaosKill(t *testing.T) {
	t.Parallel()
	for _, mode := range []failover.Mode{failover.FailOpen, failover.FailClosed, failover.FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			m := startStallMeter(t)
			srv := redistest.Start(t)
			rs := openRedis(t, srv.URL())
			var bl breakerLog
			fs := newChaosStore(rs, mode, &bl)
			keys := []string{"k0", "k1", "k2", "k3"}
			waitDecided(t, fs, "warm")

			l := startLoad(t, fs, chaosWorkers, keys...)
			o, calls := runOutage(t, l, srv.Kill, srv.Restart)
			checkOutage(t, m, mode, &bl, o, calls, "kill")

			// Redis restarted empty (no persistence), so keys it holds now were
			// written by decisions made after the restart.
			for _, k := range keys {
				if got := mustDo(t, srv, "EXISTS", rs.Key(chaosPolicy, k)); got != "1" {
					t.Errorf("load key %q is not in Redis after recovery (EXISTS = %s)", k, got)
				}
			}

			switch mode {
			case failover.FailClosed:
				t.Logf("denials by cause:%s", causes(calls))
				breakerDenials := 0
				for _, c := range calls {
					if errors.Is(c.err, failover.ErrBreakerOpen) {
						breakerDenials++
					}
				}
				if breakerDenials == 0 {
					t.Error("no call was denied by the open breaker: every failure cost a timeout or a dial")
				}
			case failover.FailLocal:
				// Every degraded call went to the same local store, which must
				// hold each key to the policy's capacity — and a key Redis has
				// denied stays denied (GCRA at 20/hour frees the next unit
				// minutes later).
				tried := make([]int64, len(keys))
				admitted := make([]int64, len(keys))
				deniedAt := make([]time.Time, len(keys)) // Redis' first denial of the key
				for _, c := range calls {
					if c.byRedis() && !c.res.Allowed && deniedAt[c.key].IsZero() {
						deniedAt[c.key] = c.end
					}
				}
				for _, c := range calls {
					if !c.byRedis() {
						tried[c.key]++
						if c.res.Allowed {
							admitted[c.key]++
							if !deniedAt[c.key].IsZero() && c.start.After(deniedAt[c.key]) {
								t.Errorf("key %q: admitted locally at %v, after Redis denied it at %v",
									keys[c.key], c.start.Format(time.StampMicro), deniedAt[c.key].Format(time.StampMicro))
							}
						}
					}
				}
				for k := range keys {
					capacity := chaosPolicy.Capacity()
					if admitted[k] > capacity {
						t.Errorf("key %q: the local store admitted %d of %d degraded calls, over the limit %d",
							keys[k], admitted[k], tried[k], capacity)
					}
				}
				t.Logf("local admissions per key %v of degraded calls %v", admitted, tried)
			}
		})
	}
}

// TestChaosPause freezes redis-server (SIGSTOP) under load and thaws it
// (SIGCONT): the open connections stay up but nothing answers, so calls must
// time out, not hang; the breaker opens; and after SIGCONT decisions go back
// to Redis within 2 s.
func TestChaosPause(t *testing.T) {
	t.Parallel()
	m := startStallMeter(t)
	srv := redistest.Start(t)
	rs := openRedis(t, srv.URL())
	var bl breakerLog
	fs := newChaosStore(rs, failover.FailClosed, &bl)
	waitDecided(t, fs, "warm")

	l := startLoad(t, fs, chaosWorkers, "k0", "k1", "k2", "k3")
	o, calls := runOutage(t, l, srv.Pause, srv.Resume)
	checkOutage(t, m, failover.FailClosed, &bl, o, calls, "SIGSTOP")
	t.Logf("denials by cause:%s", causes(calls))
	timeouts := 0
	for _, c := range calls {
		if within(o.faulted, o.healing)(c) && errors.Is(c.err, context.DeadlineExceeded) {
			timeouts++
			if d := c.latency(); d < chaosTimeout {
				t.Errorf("a call timed out after %v, before the timeout %v", d, chaosTimeout)
			}
		}
	}
	if timeouts == 0 {
		t.Error("no call to the stopped server timed out")
	}
	t.Logf("%d calls timed out while Redis was stopped", timeouts)
}

// TestChaosNoScript empties Redis' script cache under load, with SCRIPT FLUSH
// and with a restart, on a FailClosed store so that any error would reach the
// caller: EVALSHA meets NOSCRIPT and the store must re-send the script (EVAL)
// without an error or a degraded decision.
func TestChaosNoScript(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// The timeouts are long: this test is about errors, and a timeout on a
	// loaded machine would be a false one.
	rs := openRedis(t, srv.URL(), redisstore.WithTimeout(10*time.Second))
	var bl breakerLog
	fs := newChaosStore(rs, failover.FailClosed, &bl, failover.WithTimeout(10*time.Second))
	var pols []*sluice.Policy
	for _, a := range sluice.Algorithms {
		pols = append(pols, &sluice.Policy{Name: "ns-" + string(a), Algorithm: a, Limit: 1000, Period: time.Minute})
	}

	// decide runs 6 goroutines of single and batched decisions until stop is
	// closed, counting them in n, and returns the bad ones.
	var n atomic.Int64
	decide := func(stop <-chan struct{}) (bad []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					p, q := pols[(g+i)%len(pols)], pols[(g+i+1)%len(pols)]
					key := fmt.Sprintf("k%d", i%4)
					var msg string
					if i%3 == 0 {
						reqs := []sluice.Request{{Policy: p, Key: key, Cost: 1}, {Policy: q, Key: key + "b", Cost: 1}}
						res := make([]sluice.Result, 2)
						if err := fs.DecideAll(context.Background(), reqs, res); err != nil {
							msg = fmt.Sprintf("DecideAll: %v", err)
						} else if res[0].Degraded || res[1].Degraded {
							msg = fmt.Sprintf("DecideAll degraded: %+v", res)
						}
					} else {
						r, err := fs.Decide(context.Background(), sluice.Request{Policy: p, Key: key, Cost: 1})
						if err != nil {
							msg = fmt.Sprintf("Decide: %v", err)
						} else if r.Degraded {
							msg = fmt.Sprintf("Decide degraded: %+v", r)
						}
					}
					n.Add(1)
					if msg != "" {
						mu.Lock()
						bad = append(bad, msg)
						mu.Unlock()
					}
					time.Sleep(200 * time.Microsecond)
				}
			}()
		}
		<-stop
		wg.Wait()
		return bad
	}
	// decisions waits until n decisions more than from have been made.
	decisions := func(from, more int64) bool {
		return testwait.For(testwait.Timeout, func() bool { return n.Load()-from >= more })
	}
	report := func(what string, made int64, bad []string) {
		t.Helper()
		if len(bad) > 0 {
			t.Errorf("%s: %d of %d decisions failed or were degraded, e.g. %q", what, len(bad), made, bad[:min(len(bad), 3)])
		} else {
			t.Logf("%s: %d decisions, none failed or degraded", what, made)
		}
	}
	// evals counts EVALs and FUNCTION LOADs: the store sends its Lua again
	// only after a call met NOSCRIPT or a missing function.
	evals := func() int {
		total := 0
		for _, line := range strings.Split(mustDo(t, srv, "INFO", "commandstats"), "\n") {
			for _, cmd := range []string{"cmdstat_eval:calls=", "cmdstat_function|load:calls="} {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
					calls, _, _ := strings.Cut(rest, ",")
					v, _ := strconv.Atoi(calls)
					total += v
				}
			}
		}
		return total
	}

	// SCRIPT FLUSH five times under load, each after 20 decisions at least.
	stop := make(chan struct{})
	var flushErr error
	go func() {
		defer close(stop)
		for range 5 {
			if !decisions(n.Load(), 20) {
				flushErr = errors.New("the decisions stalled")
				return
			}
			for _, flush := range []string{"SCRIPT", "FUNCTION"} {
				if _, err := srv.Do(flush, "FLUSH"); err != nil {
					flushErr = err
					return
				}
			}
		}
		if !decisions(n.Load(), 20) {
			flushErr = errors.New("the decisions stalled")
		}
	}()
	bad := decide(stop)
	if flushErr != nil {
		t.Fatalf("SCRIPT FLUSH under load: %v", flushErr)
	}
	report("across 5 SCRIPT and FUNCTION FLUSHes", n.Load(), bad)
	if e := evals(); e < 5 {
		t.Errorf("the server ran %d EVALs and FUNCTION LOADs across 5 flushes, want >= 5: the reload path was not exercised", e)
	} else {
		t.Logf("the store sent its Lua again %d times", e)
	}

	// A restart empties the cache too, and closes every connection: the
	// decisions that follow Reset (another script) are the first to meet
	// NOSCRIPT for theirs, and none may be sent down a connection the old
	// server closed. (The calls failing while Redis is down are no concern
	// here; TestChaosKill covers them.)
	srv.Restart()
	if !testwait.For(testwait.Timeout, func() bool { return fs.Reset(context.Background(), pols[0], "reconnect") == nil }) {
		t.Fatalf("Reset after Restart still fails after %v", testwait.Timeout)
	}
	if libs := mustDo(t, srv, "FUNCTION", "LIST"); !strings.Contains(libs, "sluice_") {
		t.Errorf("after the restart and one Reset the server has no sluice library: %q", libs)
	}
	stop = make(chan struct{})
	from := n.Load()
	go func() {
		defer close(stop)
		time.Sleep(300 * time.Millisecond)
		decisions(from, 200)
	}()
	bad = decide(stop)
	report("after a restart", n.Load()-from, bad)
	if e := evals(); e < 1 {
		t.Error("the server ran no EVAL after the restart: the NOSCRIPT path was not exercised")
	} else {
		t.Logf("the store fell back to EVAL %d times after the restart", e)
	}
	if bl.count() != 0 || fs.Failures() != 0 {
		t.Errorf("the breaker changed state %d times and the primary failed %d calls", bl.count(), fs.Failures())
	}
}

// TestChaosLazyConnect opens a Store with WithLazyConnect while nothing
// listens on the port: calls fail fast with ErrNotConnected; once
// redis-server starts on that port, the same Store decides on it.
func TestChaosLazyConnect(t *testing.T) {
	t.Parallel()
	m := startStallMeter(t)
	srv := redistest.Start(t)
	srv.Kill() // the port stays reserved for this server's Restart
	bound := chaosTimeout + chaosMargin

	opening := time.Now()
	rs := openRedis(t, srv.URL(), redisstore.WithLazyConnect(), redisstore.WithTimeout(chaosTimeout))
	if d := m.active(opening, time.Now()); d > chaosMargin {
		t.Errorf("Open with WithLazyConnect took %v with Redis down", d)
	}
	var bl breakerLog
	fs := newChaosStore(rs, failover.FailClosed, &bl)
	// A second fail-over Store whose breaker never opens (by a threshold out
	// of reach), so that every error carries the primary's cause.
	direct := failover.New(rs, failover.WithMode(failover.FailClosed), failover.WithTimeout(chaosTimeout), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1 << 20}))
	req := sluice.Request{Policy: chaosPolicy, Key: "k", Cost: 1}
	var worst time.Duration
	for i := range 20 {
		for _, s := range []struct {
			name  string
			store sluice.Store
			want  []error
		}{
			{"Store", rs, []error{redisstore.ErrNotConnected}},
			{"FailClosed", direct, []error{failover.ErrUnavailable, redisstore.ErrNotConnected}},
			{"FailClosed with breaker", fs, []error{failover.ErrUnavailable}},
		} {
			start := time.Now()
			r, err := s.store.Decide(context.Background(), req)
			d := m.active(start, time.Now())
			worst = max(worst, d)
			for _, want := range s.want {
				if !errors.Is(err, want) {
					t.Errorf("%s call %d with Redis down: %+v, %v; want an error wrapping %v", s.name, i, r, err, want)
				}
			}
			if d > bound {
				t.Errorf("%s call %d with Redis down took %v, want <= %v", s.name, i, d, bound)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if bl.opened(opening).IsZero() {
		t.Error("the breaker did not open while Redis was down")
	}

	restarting := time.Now()
	srv.Restart()
	up := time.Now()
	var connected time.Time
	if !testwait.For(testwait.Timeout, func() bool {
		_, err := rs.Decide(context.Background(), req)
		if err == nil {
			connected = time.Now()
		}
		return err == nil
	}) {
		t.Fatalf("the lazy Store still fails %v after redis-server started", testwait.Timeout)
	}
	r := waitDecided(t, fs, "k")
	recovered := time.Now()
	t.Logf("slowest call while down %v (not counting stalls); redis-server start took %v; the Store decided %v after it was up, the fail-over Store %v",
		worst.Round(time.Millisecond), up.Sub(restarting).Round(time.Millisecond),
		connected.Sub(up).Round(time.Millisecond), recovered.Sub(up).Round(time.Millisecond))
	if d := m.active(up, connected); d > chaosRecovery {
		t.Errorf("the lazy Store connected %v after redis-server was up, want <= %v", d, chaosRecovery)
	}
	if d := m.active(up, recovered); d > chaosRecovery {
		t.Errorf("the fail-over Store decided on Redis %v after redis-server was up, want <= %v", d, chaosRecovery)
	}
	if got := mustDo(t, srv, "EXISTS", rs.Key(chaosPolicy, "k")); got != "1" || r.Remaining > chaosPolicy.Capacity()-2 {
		t.Errorf("after connecting: %+v and EXISTS = %s; want the key in Redis with at least 2 units used", r, got)
	}
}
