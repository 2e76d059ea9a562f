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

// A healthy primary is decided on as if the wrapper were not there.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		m := memory.New(memory.WithClock(clock))
		return storetest.Harness{Store: failover.New(m, failover.WithMode(failover.FailClosed), failover.WithClock(clock)), TTL: m.TTL}
	})
}

// flaky is a primary whose health the test switches: a memory store that
// fails every call with errDown while down is set.
type flaky struct {
	*memory.Store
	down  atomic.Bool
	calls atomic.Int64
	block bool // while down, wait for the context instead of failing at once
}

var errDown = errors.New("connection refused")

func (f *flaky) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return sluice.Result{}, err
	}
	return f.Store.Decide(ctx, req)
}

func (f *flaky) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.DecideAll(ctx, reqs, results)
}

func (f *flaky) Reserve(ctx context.Context, req sluice.Request, upTo int64) (sluice.Reservation, error) {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return sluice.Reservation{}, err
	}
	return f.Store.Reserve(ctx, req, upTo)
}

func (f *flaky) Release(ctx context.Context, req sluice.Request, r sluice.Reservation, unused int64) error {
	f.calls.Add(1)
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.Release(ctx, req, r, unused)
}

func (f *flaky) fail(ctx context.Context) error {
	if !f.down.Load() {
		return nil
	}
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return errDown
}

var (
	ctx    = context.Background()
	policy = &sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute}
)

func newFlaky(clock sluice.Clock) *flaky {
	return &flaky{Store: memory.New(memory.WithClock(clock))}
}

func TestFailOpenAndBreaker(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	var transitions []string
	s := failover.New(p, failover.WithMode(failover.FailOpen), failover.WithClock(clock),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 3, FailureRate: 1, Cooldown: time.Second, Probes: 1}),
		failover.WithStateChange(func(from, to failover.BreakerState) {
			transitions = append(transitions, from.String()+"->"+to.String())
		}))
	req := sluice.Request{Policy: policy, Key: "k", Cost: 1}

	r, err := s.Decide(ctx, req)
	if err != nil || !r.Allowed || r.Degraded || r.Remaining != 99 {
		t.Fatalf("healthy: %+v, %v", r, err)
	}
	p.down.Store(true)
	for i := range 3 {
		r, err := s.Decide(ctx, req)
		if err != nil || !r.Allowed || !r.Degraded || r.Limit != 100 || r.Remaining != 99 {
			t.Fatalf("failure %d under FailOpen: %+v, %v", i, r, err)
		}
	}
	if s.State() != failover.BreakerOpen {
		t.Fatalf("after 3 failures the breaker is %v, want open", s.State())
	}
	before := p.calls.Load()
	for range 100 {
		if r, err := s.Decide(ctx, req); err != nil || !r.Degraded {
			t.Fatalf("open breaker: %+v, %v", r, err)
		}
	}
	if n := p.calls.Load() - before; n != 0 {
		t.Fatalf("an open breaker called the primary %d times", n)
	}

	// After the cool-down one call probes; it fails, so the breaker reopens.
	clock.Advance(time.Second)
	s.Decide(ctx, req)
	if n := p.calls.Load() - before; n != 1 || s.State() != failover.BreakerOpen {
		t.Fatalf("after the cool-down: %d primary calls, breaker %v; want 1 probe, open", n, s.State())
	}
	clock.Advance(999 * time.Millisecond)
	s.Decide(ctx, req)
	if n := p.calls.Load() - before; n != 1 {
		t.Fatalf("the failed probe did not restart the cool-down: %d calls", n)
	}

	// The primary is back: the next probe closes the breaker.
	p.down.Store(false)
	clock.Advance(time.Millisecond)
	r, err = s.Decide(ctx, req)
	if err != nil || r.Degraded || !r.Allowed || s.State() != failover.BreakerClosed {
		t.Fatalf("probe after recovery: %+v, %v, breaker %v", r, err, s.State())
	}
	want := []string{"closed->open", "open->half_open", "half_open->open", "open->half_open", "half_open->closed"}
	if len(transitions) != len(want) {
		t.Fatalf("transitions %v, want %v", transitions, want)
	}
	for i := range want {
		if transitions[i] != want[i] {
			t.Fatalf("transitions %v, want %v", transitions, want)
		}
	}
}

func TestFailClosed(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	s := failover.New(p, failover.WithMode(failover.FailClosed), failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: 2 * time.Second}))
	p.down.Store(true)
	_, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1})
	var ue *failover.UnavailableError
	if !errors.Is(err, failover.ErrUnavailable) || !errors.Is(err, errDown) || !errors.As(err, &ue) {
		t.Fatalf("FailClosed error %v: want ErrUnavailable wrapping the cause", err)
	}
	if ue.RetryAfter != 2*time.Second {
		t.Errorf("RetryAfter %v, want the cool-down 2s", ue.RetryAfter)
	}
	clock.Advance(500 * time.Millisecond)
	res := make([]sluice.Result, 2)
	err = s.DecideAll(ctx, []sluice.Request{{Policy: policy, Key: "a", Cost: 1}, {Policy: policy, Key: "b", Cost: 1}}, res)
	if !errors.Is(err, failover.ErrBreakerOpen) || !errors.As(err, &ue) || ue.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("DecideAll with the breaker open: %v (%+v)", err, ue)
	}
}

// FailLocal decides on a memory store with each limit divided by the nodes,
// and goes back to the primary, whose counts it never touched, on recovery.
func TestFailLocal(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	local := memory.New(memory.WithClock(clock))
	s := failover.New(p, failover.WithMode(failover.FailLocal), failover.WithLocal(local), failover.WithNodes(4),
		failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Second}))
	fw := &sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute}
	p.down.Store(true)
	admitted := 0
	for range 200 {
		r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "k", Cost: 1})
		if err != nil || !r.Degraded {
			t.Fatalf("FailLocal: %+v, %v", r, err)
		}
		if r.Allowed {
			admitted++
			if r.Limit != 25 {
				t.Fatalf("local result reports limit %d, want 100/4", r.Limit)
			}
		}
	}
	if admitted != 25 {
		t.Fatalf("FailLocal with 4 nodes admitted %d of a 100 limit, want 25", admitted)
	}
	// A cost the divided limit can never admit is denied, not an error.
	if r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "big", Cost: 50}); err != nil || r.Allowed || r.RetryAfter != time.Minute {
		t.Fatalf("cost 50 over a local capacity of 25: %+v, %v", r, err)
	}
	// All or nothing holds locally too.
	res := make([]sluice.Result, 2)
	if err := s.DecideAll(ctx, []sluice.Request{{Policy: fw, Key: "k", Cost: 1}, {Policy: fw, Key: "other", Cost: 1}}, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Allowed || res[1].Allowed || !res[0].Degraded {
		t.Fatalf("local batch with an exhausted key: %+v", res)
	}
	divided := *fw
	divided.Limit = 25
	if r, _ := local.Decide(ctx, sluice.Request{Policy: &divided, Key: "other"}); r.Remaining != 25 {
		t.Fatalf("the denied batch charged key other locally: remaining %d", r.Remaining)
	}

	p.down.Store(false)
	clock.Advance(time.Second)
	r, err := s.Decide(ctx, sluice.Request{Policy: fw, Key: "k", Cost: 1})
	if err != nil || r.Degraded || !r.Allowed || r.Remaining != 99 {
		t.Fatalf("after recovery: %+v, %v; want the primary's untouched count", r, err)
	}
}

// A caller's mistake is the caller's: it passes through and is not a store
// failure.
func TestCallerErrorsPassThrough(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	bad := errors.Join(sluice.ErrInvalidKey, errors.New("key too long"))
	s := failover.New(errStore{bad}, failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Second}))
	for range 3 {
		if _, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrInvalidKey) {
			t.Fatalf("caller error became %v", err)
		}
	}
	if s.State() != failover.BreakerClosed {
		t.Fatalf("caller errors opened the breaker")
	}
}

type errStore struct{ err error }

func (e errStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, e.err
}
func (e errStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error { return e.err }

// A primary that hangs costs the timeout, not more; a caller's own shorter
// deadline or cancellation is not held against the store.
func TestTimeout(t *testing.T) {
	p := &flaky{Store: memory.New(), block: true}
	p.down.Store(true)
	const timeout = 30 * time.Millisecond
	s := failover.New(p, failover.WithMode(failover.FailOpen), failover.WithTimeout(timeout),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: 2, FailureRate: 1, Cooldown: time.Hour}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1})
			if took := time.Since(start); took > timeout+500*time.Millisecond {
				t.Errorf("a hanging primary took %v, timeout %v", took, timeout)
			}
			if err != nil || !r.Degraded || !r.Allowed {
				t.Errorf("timed out call: %+v, %v", r, err)
			}
		}()
	}
	wg.Wait()
	// The eight were in flight together: one stall, one failure.
	if s.State() != failover.BreakerClosed {
		t.Fatalf("one stall's concurrent timeouts opened the breaker")
	}
	if _, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if s.State() != failover.BreakerOpen {
		t.Fatalf("a second, later timeout did not open the breaker")
	}

	p2 := &flaky{Store: memory.New(), block: true}
	p2.down.Store(true)
	s2 := failover.New(p2, failover.WithTimeout(time.Hour), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Hour}))
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := s2.Decide(short, sluice.Request{Policy: policy, Key: "k", Cost: 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller deadline: %v", err)
	}
	if s2.State() != failover.BreakerClosed {
		t.Fatalf("a caller's deadline opened the breaker")
	}
}

// A probe whose caller went away is released: the next call probes (with a
// single probe allowed, a lost one would keep the breaker half_open forever).
func TestAbandonedProbe(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	p := newFlaky(clock)
	s := failover.New(p, failover.WithClock(clock), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Second, Probes: 1}))
	p.down.Store(true)
	s.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1})
	clock.Advance(time.Second)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	p.down.Store(false)
	s.Decide(gone, sluice.Request{Policy: policy, Key: "k", Cost: 1})
	if r, err := s.Decide(ctx, sluice.Request{Policy: policy, Key: "k", Cost: 1}); err != nil || r.Degraded {
		t.Fatalf("next call after an abandoned probe: %+v, %v", r, err)
	}
}

// TestModeZeroIsDefault: Mode's zero value is FailLocal, what New uses
// without WithMode, so a Mode field left unset means the default and never
// FailOpen (admitting everything uncounted).
func TestModeZeroIsDefault(t *testing.T) {
	var zero failover.Mode
	if zero != failover.FailLocal || zero.String() != "local" {
		t.Errorf("Mode's zero value is %v, want FailLocal", zero)
	}
	if got := failover.New(nil).Mode(); got != zero {
		t.Errorf("New without WithMode: %v, want the zero value %v", got, zero)
	}
	if got := failover.New(nil, failover.WithMode(zero)).Mode(); got != failover.FailLocal {
		t.Errorf("WithMode(zero value): %v, want FailLocal", got)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []failover.Mode{failover.FailOpen, failover.FailClosed, failover.FailLocal} {
		if got, err := failover.ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	for s, want := range map[string]failover.Mode{"local": failover.FailLocal, "CLOSED": failover.FailClosed, "Open": failover.FailOpen} {
		if got, err := failover.ParseMode(s); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := failover.ParseMode("sometimes"); err == nil {
		t.Error("ParseMode accepted sometimes")
	}
}
