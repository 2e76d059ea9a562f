package failover

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A timer that fires on time ends the call; one that fires late — this
// process was not running — is stretched by its lateness, within the max.
// fire is called directly with the times it would see: no sleeping.
func TestWatchdogStretchesLateTimers(t *testing.T) {
	newDog := func(started, due time.Duration, limit time.Duration) (*watchdog, context.Context) {
		ctx, cancel := context.WithCancelCause(context.Background())
		now := time.Now()
		w := &watchdog{cancel: cancel, start: now.Add(-started), due: now.Add(-due), limit: limit,
			timer: time.AfterFunc(time.Hour, func() {})}
		t.Cleanup(func() { w.timer.Stop(); cancel(nil) })
		return w, ctx
	}

	// Due just now: the store had its time.
	w, ctx := newDog(100*time.Millisecond, 0, time.Second)
	w.fire()
	if !errors.Is(context.Cause(ctx), ErrTimeout) {
		t.Fatalf("a timer on time: cause %v, want ErrTimeout", context.Cause(ctx))
	}

	// Due 80ms ago: the process stalled; the call gets 80ms more.
	w, ctx = newDog(180*time.Millisecond, 80*time.Millisecond, time.Second)
	before := time.Now()
	w.fire()
	if ctx.Err() != nil {
		t.Fatalf("a timer 80ms late ended the call: %v", context.Cause(ctx))
	}
	if got := w.due.Sub(before); got < 70*time.Millisecond || got > 90*time.Millisecond+3*time.Since(before) {
		t.Fatalf("a timer 80ms late was stretched to %v from now, want about 80ms", got)
	}

	// Late, but the max is spent: the call ends.
	w, ctx = newDog(time.Second, 200*time.Millisecond, time.Second)
	w.fire()
	if !errors.Is(context.Cause(ctx), ErrTimeout) {
		t.Fatalf("a late timer past the max: cause %v, want ErrTimeout", context.Cause(ctx))
	}

	// A finished call is left alone.
	w, ctx = newDog(100*time.Millisecond, 0, time.Second)
	w.done = true
	w.fire()
	if ctx.Err() != nil {
		t.Fatal("fire ended a call that had finished")
	}
}
