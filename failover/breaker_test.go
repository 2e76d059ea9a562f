package failover_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// The breaker opens on a failure rate over its window, not on a run: one
// failure in four never opens it; three in four do.
func TestBreakerFailureRate(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	s := failover.New(p, failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 20, FailureRate: 0.5}))
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}
	for i := range 200 {
		p.down.Store(i%4 == 0)
		s.Decide(ctx, req)
	}
	if s.State() != failover.BreakerClosed {
		t.Fatalf("a 25%% failure rate opened the breaker")
	}
	opened := -1
	for i := range 40 {
		p.down.Store(i%4 != 0)
		s.Decide(ctx, req)
		if s.State() == failover.BreakerOpen {
			opened = i
			break
		}
	}
	// The window of 20 held 5 failures; 10 are reached within 20 calls.
	if opened < 0 || opened > 20 {
		t.Fatalf("a 75%% failure rate opened the breaker after %d calls, want within one window", opened)
	}
	// Fewer calls than the window never open it, whatever their outcome.
	s2 := failover.New(p, failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 20}))
	p.down.Store(true)
	for range 19 {
		s2.Decide(ctx, req)
	}
	if s2.State() != failover.BreakerClosed {
		t.Fatal("19 calls opened a breaker that needs 20")
	}
	s2.Decide(ctx, req)
	if s2.State() != failover.BreakerOpen {
		t.Fatal("20 failures of 20 did not open the breaker")
	}
}

// gate is a primary that holds every call until released, then answers or
// fails all of them: the calls in flight during one stall.
type gate struct {
	*memory.Store
	arrived sync.WaitGroup
	release chan struct{}
	fail    atomic.Bool
	calls   atomic.Int64
}

func (g *gate) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	g.calls.Add(1)
	g.arrived.Done()
	<-g.release
	if g.fail.Load() {
		return sluice.Result{}, errDown
	}
	return g.Store.Decide(ctx, req)
}

// Failures of calls in flight together are one event: 64 calls failing at
// once count as one failure, and a later failure adds a second.
func TestBreakerCoalescesOneStall(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	g := &gate{Store: memory.New(memory.WithClock(clock)), release: make(chan struct{})}
	g.fail.Store(true)
	s := failover.New(g, failover.WithClock(clock), failover.WithTimeout(-1),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 2, FailureRate: 1}))
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}
	const n = 64
	g.arrived.Add(n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if r, err := s.Decide(ctx, req); err != nil || !r.Degraded {
				t.Errorf("a failed call under FailLocal: %+v, %v", r, err)
			}
		})
	}
	g.arrived.Wait()
	close(g.release)
	wg.Wait()
	if s.State() != failover.BreakerClosed || s.Failures() != n {
		t.Fatalf("64 concurrent failures: breaker %v, failures %d; want closed (one event of 64 failed calls)", s.State(), s.Failures())
	}
	g.arrived.Add(1)
	s.Decide(ctx, req)
	if s.State() != failover.BreakerOpen {
		t.Fatalf("a second, later failure: breaker %v, want open", s.State())
	}
}

// A half_open breaker lets a bounded number of probes through, and closes
// when all of them succeed.
func TestBreakerHalfOpenProbes(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	g := &gate{Store: memory.New(memory.WithClock(clock)), release: make(chan struct{})}
	g.fail.Store(true)
	var mu sync.Mutex
	var transitions []string
	s := failover.New(g, failover.WithClock(clock), failover.WithTimeout(-1),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Second, Probes: 2}),
		failover.WithStateChange(func(from, to failover.BreakerState) {
			mu.Lock()
			transitions = append(transitions, to.String())
			mu.Unlock()
		}))
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}
	g.arrived.Add(1)
	close(g.release) // let the first call fail at once
	s.Decide(ctx, req)
	if s.State() != failover.BreakerOpen {
		t.Fatalf("breaker %v after a failure, want open", s.State())
	}
	g.release = make(chan struct{})
	g.fail.Store(false)
	clock.Advance(time.Second)
	before := g.calls.Load()
	g.arrived.Add(2)
	var wg sync.WaitGroup
	var degraded atomic.Int64
	probing := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			if r, _ := s.Decide(ctx, req); r.Degraded {
				degraded.Add(1)
			}
		})
	}
	go func() { g.arrived.Wait(); close(probing) }()
	<-probing // two probes are inside the primary
	if s.State() != failover.BreakerHalfOpen {
		t.Fatalf("breaker %v while probing, want half_open", s.State())
	}
	for range 10 {
		if r, _ := s.Decide(ctx, req); !r.Degraded {
			t.Fatal("a third call went to the primary while two probes were out")
		}
	}
	close(g.release)
	wg.Wait()
	if n := g.calls.Load() - before; n != 2 || degraded.Load() != 0 {
		t.Fatalf("%d calls reached the primary (%d probes degraded), want the 2 probes", n, degraded.Load())
	}
	if s.State() != failover.BreakerClosed {
		t.Fatalf("breaker %v after both probes succeeded, want closed", s.State())
	}
	mu.Lock()
	defer mu.Unlock()
	if got := len(transitions); got != 3 || transitions[1] != "half_open" {
		t.Fatalf("transitions %v, want open, half_open, closed", transitions)
	}
}

// slow is a primary each of whose calls takes a set time on the fake clock.
type slow struct {
	*memory.Store
	clock   *storetest.Clock
	latency atomic.Int64
}

func (s *slow) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	s.clock.Advance(time.Duration(s.latency.Load()))
	return s.Store.Decide(ctx, req)
}

// The adaptive timeout starts at its max, follows the latency of successful
// calls (twice mean + 4 deviations) and stays within [min, max]; a fixed
// timeout does not move.
func TestAdaptiveTimeout(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := &slow{Store: memory.New(memory.WithClock(clock)), clock: clock}
	s := failover.New(p, failover.WithClock(clock), failover.WithAdaptiveTimeout(50*time.Millisecond, time.Second))
	if got := s.Timeout(); got != time.Second {
		t.Fatalf("timeout before any call %v, want the max 1s", got)
	}
	req := sluice.Request{Policy: policy, Key: "k"}
	run := func(latency time.Duration, n int) time.Duration {
		p.latency.Store(int64(latency))
		for range n {
			if _, err := s.Decide(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		return s.Timeout()
	}
	if got := run(time.Millisecond, 50); got != 50*time.Millisecond {
		t.Errorf("1ms calls: timeout %v, want the min 50ms", got)
	}
	if got := run(100*time.Millisecond, 100); got < 190*time.Millisecond || got > 210*time.Millisecond {
		t.Errorf("steady 100ms calls: timeout %v, want about 2 × 100ms", got)
	}
	if got := run(time.Millisecond, 1); got <= 200*time.Millisecond {
		t.Errorf("one fast call after slow ones dropped the timeout to %v: the deviation should hold it up", got)
	}
	if got := run(800*time.Millisecond, 50); got != time.Second {
		t.Errorf("800ms calls: timeout %v, want the max 1s", got)
	}
	fixed := failover.New(p, failover.WithClock(clock), failover.WithTimeout(10*time.Millisecond))
	p.latency.Store(int64(time.Millisecond))
	for range 10 {
		fixed.Decide(ctx, req)
	}
	if got := fixed.Timeout(); got != 10*time.Millisecond {
		t.Errorf("fixed timeout moved to %v", got)
	}
}

// Every call to the primary that answered or failed is observed, with its
// latency on the clock and its error.
func TestObserve(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := &slow{Store: memory.New(memory.WithClock(clock)), clock: clock}
	p.latency.Store(int64(3 * time.Millisecond))
	s := failover.New(p, failover.WithClock(clock))
	var calls []failover.Call
	s.Observe(func(c failover.Call) { calls = append(calls, c) })
	s.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1})
	bad := failover.New(errStore{sluice.ErrInvalidKey}, failover.WithClock(clock))
	bad.Observe(func(c failover.Call) { calls = append(calls, c) })
	bad.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1}) // the caller's mistake: not observed
	if len(calls) != 1 || calls[0].Latency != 3*time.Millisecond || calls[0].Err != nil {
		t.Fatalf("observed %+v", calls)
	}
	f := newFlaky(clock)
	f.down.Store(true)
	s2 := failover.New(f, failover.WithClock(clock))
	s2.Observe(func(c failover.Call) { calls = append(calls, c) })
	s2.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1})
	if len(calls) != 2 || !errors.Is(calls[1].Err, errDown) {
		t.Fatalf("observed %+v", calls)
	}
}

// halfBatch is a primary whose DecideAll fails after deciding the first half
// of the batch: an error mid-batch.
type halfBatch struct{ *memory.Store }

func (h halfBatch) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, errDown
}

func (h halfBatch) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	n := len(reqs) / 2
	if err := h.Store.DecideAll(ctx, reqs[:n], results[:n]); err != nil {
		return err
	}
	return errDown
}

// Every degraded decision is bounded, in every mode but an explicit open:
// on errors, on an open breaker, on timeouts, in batches and on errors
// mid-batch. Local (the default) admits at most the limit per key; closed
// admits nothing.
func TestDegradedIsBounded(t *testing.T) {
	fw := &sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour}
	for _, mode := range []failover.Mode{failover.FailLocal, failover.FailClosed} {
		want := map[failover.Mode]int{failover.FailLocal: 10, failover.FailClosed: 0}[mode]
		primaries := map[string]func(*storetest.Clock) sluice.Store{
			"errors": func(c *storetest.Clock) sluice.Store { f := newFlaky(c); f.down.Store(true); return f },
			"timeouts": func(c *storetest.Clock) sluice.Store {
				f := &flaky{Store: memory.New(memory.WithClock(c)), block: true}
				f.down.Store(true)
				return f
			},
			"errors mid-batch": func(c *storetest.Clock) sluice.Store { return halfBatch{memory.New(memory.WithClock(c))} },
		}
		for name, primary := range primaries {
			t.Run(mode.String()+"/"+name, func(t *testing.T) {
				clock := storetest.NewClock(storetest.Epoch)
				opts := []failover.Option{failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 4})}
				if mode != failover.FailLocal {
					opts = append(opts, failover.WithMode(mode)) // local is the default
				}
				if name == "timeouts" {
					opts = append(opts, failover.WithTimeout(time.Millisecond))
				}
				s := failover.New(primary(clock), opts...)
				admitted := 0
				for i := range 40 { // through the failures, then the open breaker
					if i%2 == 0 {
						r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "k", Cost: 1})
						if err == nil && r.Allowed {
							admitted++
						}
						continue
					}
					res := make([]sluice.Result, 2)
					err := s.DecideAll(ctx, []sluice.Request{{Policy: fw, Key: "k", Cost: 1}, {Policy: fw, Key: "other", Cost: 1}}, res)
					if err == nil && res[0].Allowed {
						admitted++
					}
				}
				if admitted != want {
					t.Fatalf("%d admitted on key k, want %d", admitted, want)
				}
				if s.State() != failover.BreakerOpen {
					t.Fatalf("breaker %v after 40 failing calls", s.State())
				}
			})
		}
	}
}

// Under FailLocal a key the primary denied stays denied while the primary is
// away, until the primary's RetryAfter — not a fresh local limit — and in a
// batch only the key that could not afford its cost is remembered.
func TestLocalRemembersDenials(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	fw := &sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Hour}
	s := failover.New(p, failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1}))
	for range 3 {
		s.Decide(ctx, sluice.Request{Policy: fw, Key: "hot", Cost: 1})
	}
	res := make([]sluice.Result, 2)
	if err := s.DecideAll(ctx, []sluice.Request{{Policy: fw, Key: "hot", Cost: 1}, {Policy: fw, Key: "cold", Cost: 1}}, res); err != nil || res[0].Allowed {
		t.Fatalf("a batch with the exhausted key: %+v, %v", res, err)
	}
	r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "hot", Cost: 1})
	if err != nil || r.Allowed || r.Degraded {
		t.Fatalf("the primary's denial: %+v, %v", r, err)
	}
	retry := r.RetryAfter

	p.down.Store(true)
	clock.Advance(time.Minute)
	for range 5 {
		r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "hot", Cost: 1})
		if err != nil || r.Allowed || !r.Degraded || r.RetryAfter != retry-time.Minute {
			t.Fatalf("an exhausted key while the primary is away: %+v, %v; want denied until the primary's RetryAfter", r, err)
		}
	}
	if err := s.DecideAll(ctx, []sluice.Request{{Policy: fw, Key: "hot", Cost: 1}}, res[:1]); err != nil || res[0].Allowed || !res[0].Degraded {
		t.Fatalf("a batch with the exhausted key while the primary is away: %+v, %v", res[0], err)
	}
	// cold was denied only with hot: it has its local limit.
	if r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "cold", Cost: 1}); err != nil || !r.Allowed || !r.Degraded {
		t.Fatalf("a key denied only in hot's batch: %+v, %v; want admitted locally", r, err)
	}
	// After the primary's RetryAfter the local limit applies.
	clock.Advance(retry)
	if r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "hot", Cost: 1}); err != nil || !r.Allowed || !r.Degraded {
		t.Fatalf("after the primary's RetryAfter: %+v, %v; want admitted locally", r, err)
	}
}

// A failure counts for the breaker's Window only: on a quiet node failures
// far apart do not add up to an outage.
func TestBreakerForgetsOldFailures(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	s := failover.New(p, failover.WithClock(clock),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 4, FailureRate: 0.5, Window: 10 * time.Second}))
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}
	decide := func(down bool) {
		p.down.Store(down)
		s.Decide(ctx, req)
	}
	decide(true)
	decide(false)
	decide(false)
	clock.Advance(11 * time.Second)
	decide(true) // 2 failures among the last 4, but the first is 11 s old
	if s.State() != failover.BreakerClosed {
		t.Fatal("a failure older than the window counted")
	}
	decide(true)
	if s.State() != failover.BreakerOpen {
		t.Fatalf("two recent failures among the last 4 calls: breaker %v, want open", s.State())
	}
}
