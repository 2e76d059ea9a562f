// Package testwait is the one way Sluice's tests wait for something that
// happens on its own time — a server starting, a file event, a reconnection,
// a message between nodes — which no fake clock can drive. It polls, and its
// default deadline is far beyond what a passing test waits, so a loaded
// machine slows a test down instead of failing it.
package testwait

import (
	"testing"
	"time"
)

// Timeout is how long Until and UntilSaw wait before they fail the test.
const Timeout = time.Minute

// The pause between two looks at the condition starts short, for what comes
// true at once (a background call ending), and doubles up to a cap, for what
// takes a while (a server starting).
const (
	firstPause = 100 * time.Microsecond
	maxPause   = 10 * time.Millisecond
)

// Until polls cond until it holds, failing t when it has not within Timeout.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	UntilSaw(t, what, func() (bool, string) { return cond(), "" })
}

// UntilSaw polls f until it reports done, failing t when it has not within
// Timeout with f's last description of what it saw.
func UntilSaw(t testing.TB, what string, f func() (done bool, saw string)) {
	t.Helper()
	Within(t, Timeout, what, f)
}

// Within is UntilSaw with a deadline of d, for a wait whose bound is what the
// test asserts (a change seen by every node within a second, say). Waits
// that merely have to end use Until or UntilSaw.
func Within(t testing.TB, d time.Duration, what string, f func() (done bool, saw string)) {
	t.Helper()
	if ok, saw := poll(d, f); !ok {
		if saw != "" {
			saw = "; last saw: " + saw
		}
		t.Fatalf("not %s within %v%s", what, d, saw)
	}
}

// For polls cond until it holds or d has passed, looking once more at the
// deadline, and reports whether it held: for a test that says more than
// Until would when it did not.
func For(d time.Duration, cond func() bool) bool {
	ok, _ := poll(d, func() (bool, string) { return cond(), "" })
	return ok
}

// poll calls f until it reports done or d has passed, and returns its last
// answer.
func poll(d time.Duration, f func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(d)
	for pause := firstPause; ; pause = min(2*pause, maxPause) {
		done, saw := f()
		if done || !time.Now().Before(deadline) {
			return done, saw
		}
		time.Sleep(pause)
	}
}
