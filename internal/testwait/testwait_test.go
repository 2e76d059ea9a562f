package testwait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, so the helpers' failures can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

// TestWaits: a condition that comes true after a few looks passes; one
// that never does fails with what was waited for and what was last seen;
// For reports instead of failing.
func TestWaits(t *testing.T) {
	var looks atomic.Int64
	Until(t, "the third look", func() bool { return looks.Add(1) >= 3 })
	if looks.Load() != 3 {
		t.Errorf("Until looked %d times for a condition true at the third", looks.Load())
	}
	r := &recorder{TB: t}
	n := 0
	Within(r, 30*time.Millisecond, "never", func() (bool, string) { n++; return false, fmt.Sprint("look ", n) })
	if !strings.Contains(r.failed, "never") || !strings.Contains(r.failed, "last saw: look") || !strings.Contains(r.failed, "30ms") {
		t.Errorf("a condition never true: recorded %q, want what, the bound and the last thing seen", r.failed)
	}
	if n < 2 {
		t.Errorf("Within looked %d times in 30ms, want it to poll", n)
	}
	if For(20*time.Millisecond, func() bool { return false }) {
		t.Error("For reported a false condition held")
	}
	if !For(Timeout, func() bool { return true }) {
		t.Error("For reported a true condition did not hold")
	}
}
