package failover

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Adaptive timeout defaults (see docs/operations.md for the measurements
// behind them).
const (
	// DefaultMinTimeout is the shortest the adaptive timeout gets. A healthy
	// Redis answers in a millisecond, but a process sharing its cores with
	// others waits tens of milliseconds now and then for its own turn to run,
	// and a Redis busy with a slow command (a save fork, a big DEL) stalls
	// as long: neither is an outage.
	DefaultMinTimeout = 100 * time.Millisecond
	// DefaultMaxTimeout is the longest: what a call waits at worst, and the
	// timeout before any call has been measured.
	DefaultMaxTimeout = time.Second
	// timeoutFactor scales the latency estimate (mean + 4 deviations, as
	// TCP's retransmission timeout) into the timeout.
	timeoutFactor = 2
	// stallSlack is how late the timeout's timer may fire before the
	// lateness is taken for a stall of this process, not of the store.
	stallSlack = 2 * time.Millisecond
)

// timeouts sets each call's timeout: a fixed one, or one that follows the
// latency of recent successful calls (an exponentially weighted mean and
// mean deviation, as TCP estimates its retransmission timeout), times
// timeoutFactor, clamped to [min, max].
type timeouts struct {
	fixed    time.Duration // > 0: every call gets this; < 0: no timeout
	min, max time.Duration

	current atomic.Int64 // ns

	mu        sync.Mutex
	mean, dev float64 // ns
	samples   int
}

func (t *timeouts) init() {
	t.current.Store(int64(t.max))
}

// timeout is the bound of the next call; 0 means none.
func (t *timeouts) timeout() time.Duration {
	switch {
	case t.fixed > 0:
		return t.fixed
	case t.fixed < 0:
		return 0
	}
	return time.Duration(t.current.Load())
}

// observe feeds the latency of a successful call into the estimate.
func (t *timeouts) observe(d time.Duration) {
	if t.fixed != 0 {
		return
	}
	x := float64(d)
	t.mu.Lock()
	if t.samples == 0 {
		t.mean, t.dev = x, x/2
	} else {
		diff := x - t.mean
		if diff < 0 {
			diff = -diff
		}
		t.dev += (diff - t.dev) / 4
		t.mean += (x - t.mean) / 8
	}
	t.samples++
	next := time.Duration(timeoutFactor * (t.mean + 4*t.dev))
	t.mu.Unlock()
	t.current.Store(int64(min(max(next, t.min), t.max)))
}

// bound returns ctx with the call's timeout, unless the caller's own
// deadline comes sooner. An adaptive timeout that fires late — its timer was
// not run on time because this process itself was stalled — is extended by
// the lateness (up to the max), so that the time this process spent not
// running is not charged to the store. The call's error is ErrTimeout when
// the timeout ended it (see timedOut).
//
// A decision marked by MarkStart has waited already: its call gets at most
// what is left of the max (or of the fixed timeout) since the mark, and ok
// is false when nothing is left — the call must not be made.
func (t *timeouts) bound(ctx context.Context) (cctx context.Context, cancel context.CancelFunc, ok bool) {
	d := t.timeout()
	if d <= 0 {
		return ctx, func() {}, true
	}
	limit := t.budget()
	if start, marked := ctx.Value(startKey{}).(time.Time); marked {
		if limit -= time.Since(start); limit <= 0 {
			return nil, nil, false
		}
		d = min(d, limit)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, func() {}, true
	}
	if t.fixed > 0 {
		cctx, cancel := context.WithTimeoutCause(ctx, d, ErrTimeout)
		return cctx, cancel, true
	}
	cctx, cancelCause := context.WithCancelCause(ctx)
	w := &watchdog{cancel: cancelCause, start: time.Now(), limit: limit}
	w.due = w.start.Add(d)
	w.mu.Lock()
	w.timer = time.AfterFunc(d, w.fire)
	w.mu.Unlock()
	return cctx, func() {
		w.mu.Lock()
		w.done = true
		w.timer.Stop()
		w.mu.Unlock()
		cancelCause(context.Canceled)
	}, true
}

// budget is how long a decision marked by MarkStart may take: the max
// adaptive timeout or the fixed one; 0 when calls have no timeout.
func (t *timeouts) budget() time.Duration {
	switch {
	case t.fixed > 0:
		return t.fixed
	case t.fixed < 0:
		return 0
	}
	return t.max
}

// startKey is the context key of MarkStart.
type startKey struct{}

// MarkStart returns ctx marked with when the decision it carries began, for
// a caller that may wait before it calls the Store — package lease waits for
// its key's reservation in flight, and gives units back before reserving. A
// marked decision's calls share one budget: the maximum timeout
// (WithAdaptiveTimeout) or the fixed one (WithTimeout) counted from start,
// so the whole decision, waits included, ends within it. A call with nothing
// left of the budget is not made: the fail policy decides at once, and the
// breaker, which learnt of the stall from the call that caused the wait, is
// not told again.
func MarkStart(ctx context.Context, start time.Time) context.Context {
	return context.WithValue(ctx, startKey{}, start)
}

// errBudgetSpent is the cause of a marked decision's call not made because
// its budget was spent waiting (see MarkStart).
var errBudgetSpent = errors.New("the decision's time was spent before this call")

// timedOut reports whether the call on cctx was ended by its timeout.
func timedOut(cctx context.Context) bool {
	return context.Cause(cctx) == ErrTimeout
}

// watchdog ends a call at its timeout, stretched by the time its own timer
// fired late.
type watchdog struct {
	cancel context.CancelCauseFunc
	start  time.Time
	limit  time.Duration

	mu    sync.Mutex
	timer *time.Timer
	due   time.Time
	done  bool
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	now := time.Now()
	late := now.Sub(w.due)
	if left := w.limit - now.Sub(w.start); late > stallSlack && left > 0 {
		w.due = now.Add(min(late, left))
		w.timer.Reset(min(late, left))
		return
	}
	w.done = true
	w.cancel(ErrTimeout)
}
