package failover_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/failover"
)

// stallMeter measures the time this test process could not run at all. The
// machine is shared: a busy host deschedules the whole VM or process for
// hundreds of milliseconds, even seconds, during which no code can return
// and every timer fires late. A heartbeat goroutine waking every millisecond
// records the gaps; a call's latency minus the stalls that overlap it is
// what the code under test spent, and that is what the bounds apply to. A
// call hanging in the store does not stop the heartbeat, so it is still
// caught.
type stallMeter struct {
	mu   sync.Mutex
	gaps []stall
	stop atomic.Bool
	done chan struct{}
}

type stall struct{ from, to time.Time }

// stallMin is the shortest heartbeat gap counted as a stall; shorter ones are
// ordinary scheduling noise, which the margin absorbs.
const stallMin = 20 * time.Millisecond

func startStallMeter(t *testing.T) *stallMeter {
	m := &stallMeter{done: make(chan struct{})}
	go func() {
		defer close(m.done)
		last := time.Now()
		for !m.stop.Load() {
			time.Sleep(time.Millisecond)
			now := time.Now()
			if now.Sub(last) > stallMin {
				m.mu.Lock()
				m.gaps = append(m.gaps, stall{last.Add(time.Millisecond), now})
				m.mu.Unlock()
			}
			last = now
		}
	}()
	t.Cleanup(func() {
		m.stop.Store(true)
		<-m.done
	})
	return m
}

// stalled returns how long the process was stalled between from and to.
func (m *stallMeter) stalled(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, g := range m.gaps {
		lo, hi := g.from, g.to
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d
}

// worst returns the longest stall so far.
func (m *stallMeter) worst() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, g := range m.gaps {
		d = max(d, g.to.Sub(g.from))
	}
	return d
}

// active is the time from from to to that the process was not stalled.
func (m *stallMeter) active(from, to time.Time) time.Duration {
	return to.Sub(from) - m.stalled(from, to)
}

// checkCalls fails the test for every call (the first few are shown) that
// the fail policy does not explain or whose latency, less the process'
// stalls during it, exceeds chaosTimeout + chaosMargin. It returns the
// largest latency, raw and less stalls.
func checkCalls(t *testing.T, m *stallMeter, mode failover.Mode, calls []chaosCall) (raw, active time.Duration) {
	t.Helper()
	bound := chaosTimeout + chaosMargin
	var bad, slow int
	for _, c := range calls {
		raw = max(raw, c.latency())
		if v := verdict(mode, c); v != "" {
			if bad++; bad <= 5 {
				t.Errorf("call at %s: %s", c.start.Format("15:04:05.000"), v)
			}
		}
		if c.latency() <= bound {
			active = max(active, c.latency())
			continue
		}
		a := m.active(c.start, c.end)
		active = max(active, a)
		if a > bound {
			if slow++; slow <= 5 {
				t.Errorf("call at %s took %v (%v not counting stalls of this process), more than the timeout %v + margin %v (result %+v, err %v)",
					c.start.Format("15:04:05.000"), c.latency(), a, chaosTimeout, chaosMargin, c.res, c.err)
			}
		}
	}
	if bad > 0 || slow > 0 {
		t.Errorf("%d of %d calls not explained by the fail policy, %d slower than %v", bad, len(calls), slow, bound)
	}
	return raw, active
}

// tally counts calls by who decided them.
type tally struct {
	n, redis, degraded int
	worst              time.Duration
}

func (tl tally) String() string {
	return fmt.Sprintf("%d calls (%d by Redis, %d degraded, slowest %v)", tl.n, tl.redis, tl.degraded, tl.worst.Round(time.Millisecond))
}

// count tallies the calls that keep accepts.
func count(calls []chaosCall, keep func(chaosCall) bool) tally {
	var tl tally
	for _, c := range calls {
		if !keep(c) {
			continue
		}
		tl.n++
		if c.byRedis() {
			tl.redis++
		} else {
			tl.degraded++
		}
		tl.worst = max(tl.worst, c.latency())
	}
	return tl
}

// within accepts calls that started at or after from and ended before to
// (zero to: no end).
func within(from, to time.Time) func(chaosCall) bool {
	return func(c chaosCall) bool {
		return !c.start.Before(from) && (to.IsZero() || c.end.Before(to))
	}
}

// causes summarises the distinct causes of FailClosed denials (first line,
// numbers stripped so that ports and durations do not split them), most
// frequent first, for the log.
func causes(calls []chaosCall) string {
	n := make(map[string]int)
	for _, c := range calls {
		var ue *failover.UnavailableError
		if errors.As(c.err, &ue) {
			n[squash(ue.Cause.Error())]++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return n[b] - n[a] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n\t%6d × %s", n[k], k)
	}
	return b.String()
}

func squash(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '#'
		}
		return r
	}, s)
}
