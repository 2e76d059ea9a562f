package lab

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// naiveSkewAllow is the classic shared fixed-window counter keyed by the
// window the node's own clock is in — what NOT to do: INCR "key:window",
// admit while the result is at most L. The count is shared and atomic, but
// near an edge a node whose clock runs ahead already counts in the next
// window while the others still count in this one, so a true window can hold
// L admissions from the late nodes plus L from the early ones.
func naiveSkewAllow(ctx context.Context, c counter, nodeNow, period, limit int64) (bool, error) {
	n, err := c.incrBy(ctx, windowKey(nodeNow/period), 1)
	return n <= limit, err
}

// skewOffsets spreads the nodes' clock errors evenly over [0, skew]: node 0
// keeps true time, the last node is skew ahead.
func skewOffsets(nodes int, skew int64) []int64 {
	off := make([]int64, nodes)
	for i := 1; i < nodes; i++ {
		off[i] = int64(i) * skew / int64(nodes-1)
	}
	return off
}

// skewBursts is how many bursts a skew run sends.
const skewBursts = 3

// runSkew sends a burst just before every other window edge — each node L
// requests, starting skew/2 before the edge, when the nodes ahead are already
// past it by their clocks — and counts admissions per aligned window of true
// time. Every other edge, so the window after a burst is fresh for the next.
// The naive counter's windows follow each node's clock; Sluice decides every
// request on one time source: the virtual clock in memory, Redis server time
// on Redis. On Redis the run is in real time (see runSkewRealTime).
func runSkew(ctx context.Context, e *env) (*Report, error) {
	if e.isRedis() {
		return runSkewRealTime(ctx, e)
	}
	o := e.opts
	period, skew := micros(o.Period), micros(o.Skew)
	if 2*skew >= period {
		return nil, fmt.Errorf("skew %v must be below half the period %v", o.Skew, o.Period)
	}
	p, err := e.policy("lab-skew", sluice.FixedWindow)
	if err != nil {
		return nil, err
	}
	start, traffic := skewTraffic(o, period, skew)
	naive, err := naiveSkew(ctx, e.counter("skew"), traffic, skewOffsets(o.Nodes, skew), period, o.Limit)
	if err != nil {
		return nil, err
	}
	clock := newVClock(start)
	st := e.store("skew", clock)
	var atomic []int64
	for _, a := range traffic {
		clock.set(a.t)
		if ok, err := decide(ctx, st, p, "k"); err != nil {
			return nil, err
		} else if ok {
			atomic = append(atomic, a.t)
		}
	}
	return skewReport(o, period, int64(len(traffic)), naive, atomic, "one clock"), nil
}

// skewTraffic is a skew run's requests in virtual time: before every other
// window edge, each node L requests in the first half of the skew/2 before
// the edge. It returns the virtual start too.
func skewTraffic(o Options, period, skew int64) (int64, []arrival) {
	start := virtualStart(period)
	var traffic []arrival
	n := int64(o.Nodes) * o.Limit
	for k := range int64(skewBursts) {
		edge := start + (2*k+1)*period
		for j := range n {
			traffic = append(traffic, arrival{t: edge - skew/2 + j*(skew/4)/n, node: int(j % int64(o.Nodes))})
		}
	}
	return start, traffic
}

// naiveSkew sends traffic to the naive counter, each request's window taken
// from its node's clock (true time plus the node's offset), and returns the
// true times of the admitted requests. The counter is shared and atomic (a
// real Redis INCR on Redis) but no server time is involved, so it runs in
// virtual time on every store: its overshoot does not depend on how fast the
// machine running the lab is.
func naiveSkew(ctx context.Context, c counter, traffic []arrival, off []int64, period, limit int64) ([]int64, error) {
	var admitted []int64
	for _, a := range traffic {
		ok, err := naiveSkewAllow(ctx, c, a.t+off[a.node], period, limit)
		if err != nil {
			return nil, err
		}
		if ok {
			admitted = append(admitted, a.t)
		}
	}
	return admitted, nil
}

func skewReport(o Options, period, sent int64, naive, atomic []int64, source string) *Report {
	r := &Report{Span: spanAligned + " of true time; bound L (fixed_window)"}
	row := newRow(sluice.FixedWindow, fmt.Sprintf("naive: windows from node clocks (skew %v)", o.Skew), o.Nodes, sent,
		int64(len(naive)), maxAligned(naive, period), o.Limit)
	row.Naive = true
	r.Rows = append(r.Rows, row,
		newRow(sluice.FixedWindow, "sluice: one time source ("+source+")", o.Nodes, sent, int64(len(atomic)), maxAligned(atomic, period), o.Limit))
	r.Summary = fmt.Sprintf("With node clocks up to %v apart, fixed windows taken from each node's clock admitted %.2f× L in one true window — the nodes ahead were already counting the next window; deciding on %s kept it at %.2f×.",
		o.Skew, r.Rows[0].Overshoot, source, r.Rows[1].Overshoot)
	return r
}

// realSkewPeriod caps the period of the real-time skew run so it lasts about
// a second and a half.
const realSkewPeriod = 200 * time.Millisecond

// runSkewRealTime is skew on Redis. The naive nodes run in virtual time
// against the Redis counter (see naiveSkew). Sluice runs in real time,
// because its point is that Redis server time removes the skew: Sluice's
// store decides at server TIME, which no client clock can move. Windows are
// at most 200ms; N goroutines fire the bursts. A Sluice admission is
// attributed to the server window that admitted it: the server decided at an
// instant s after the request was sent, and its window ends at s +
// ResetAfter, an edge; that is the first edge at or after send time +
// ResetAfter whenever Redis runs the script within a period of the send.
// Timing it by the reply instead would move admissions made at the very end
// of one window into the next whenever the reply crosses the edge (a slow
// machine makes that common), an artefact of the measurement, not of the
// limiter. A slow machine can only spread Sluice's bursts out, which never
// raises what one window admits.
func runSkewRealTime(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	o.Period = min(o.Period, realSkewPeriod)
	period, skew := micros(o.Period), micros(o.Skew)
	if 2*skew >= period {
		return nil, fmt.Errorf("skew %v must be below half the period %v (on Redis the period is at most %v)", o.Skew, o.Period, realSkewPeriod)
	}
	p := &sluice.Policy{Name: "lab-skew", Algorithm: sluice.FixedWindow, Limit: o.Limit, Period: o.Period}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	off := skewOffsets(o.Nodes, skew)
	_, traffic := skewTraffic(o, period, skew)
	naive, err := naiveSkew(ctx, e.counter("skew"), traffic, off, period, o.Limit)
	if err != nil {
		return nil, err
	}
	st := e.store("skew", nil) // Redis server time
	now := func() int64 { return time.Now().UnixMicro() }
	first := (now()/period + 2) * period

	var mu sync.Mutex
	var atomic []int64
	var firstErr error
	var wg sync.WaitGroup
	node := func(allow func() (int64, bool, error), into *[]int64) {
		defer wg.Done()
		for k := range int64(skewBursts) {
			at := time.UnixMicro(first + 2*k*period - skew/2)
			select {
			case <-time.After(time.Until(at)):
			case <-ctx.Done():
				return
			}
			for range o.Limit {
				t, ok, err := allow()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if ok {
					*into = append(*into, t)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}
	for range o.Nodes {
		wg.Add(1)
		go node(func() (int64, bool, error) {
			sent := now()
			res, err := st.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1})
			// The server decided at some instant s ≥ sent, in the window
			// ending at s + ResetAfter: the first edge at or after
			// sent + ResetAfter, as long as Redis ran the script within a
			// period of the send — however late the reply comes back.
			end := (sent + res.ResetAfter.Microseconds() + period - 1) / period * period
			return end - 1, res.Allowed, err
		}, &atomic)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sent := skewBursts * int64(o.Nodes) * o.Limit
	return skewReport(o, period, sent, naive, atomic, "Redis server time"), nil
}
