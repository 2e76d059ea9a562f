package sluice

import "time"

// Clock tells the time. Stores take one so tests can control time; production
// code uses the default of each store.
type Clock interface {
	Now() time.Time
}

// SystemClock returns a Clock that reads the monotonic clock, anchored to wall
// time once when it is created. Windows stay aligned to the epoch, and an NTP step
// of the wall clock cannot make time run backwards (which would refill a bucket or
// reopen a window).
func SystemClock() Clock {
	return monotonicClock{anchor: time.Now()}
}

type monotonicClock struct{ anchor time.Time }

// Now returns the anchor plus the monotonic time elapsed since it.
func (c monotonicClock) Now() time.Time {
	// Add keeps the monotonic reading and moves the wall reading by the same
	// monotonic duration, so UnixMicro of the result never steps.
	return c.anchor.Add(time.Since(c.anchor))
}
