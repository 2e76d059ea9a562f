package lab

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// cachedNode is one node of the naive cached counter — what NOT to do. It
// decides against its local view of the window's count and talks to the
// shared counter only every S: it pushes the increments it made since the
// last sync and pulls the global count. Between syncs it cannot see what the
// other nodes admit, so together they admit more than L.
type cachedNode struct {
	window   int64 // window index the view belongs to
	view     int64 // global count at the last pull plus own admissions since
	pending  int64 // own admissions not pushed yet
	nextSync int64 // µs
}

// staleCache runs the naive cached counter over traffic with sync interval
// every (0: push and pull around every request).
type staleCache struct {
	c      counter
	period int64
	limit  int64
	every  int64
	nodes  []cachedNode
}

func windowKey(w int64) string { return fmt.Sprintf("w%d", w) }

// sync pushes n's pending admissions and pulls the global count, as of t.
func (s *staleCache) sync(ctx context.Context, n *cachedNode, t int64) error {
	if err := s.roll(ctx, n, t); err != nil {
		return err
	}
	var g int64
	var err error
	if n.pending > 0 {
		g, err = s.c.incrBy(ctx, windowKey(n.window), n.pending)
	} else {
		g, err = s.c.get(ctx, windowKey(n.window))
	}
	n.view, n.pending = g, 0
	return err
}

// roll starts a new window when t has left n's: the old window's pending
// admissions are pushed (for the record), and the view starts again at 0
// until the next pull.
func (s *staleCache) roll(ctx context.Context, n *cachedNode, t int64) error {
	w := t / s.period
	if w == n.window {
		return nil
	}
	if n.pending > 0 {
		if _, err := s.c.incrBy(ctx, windowKey(n.window), n.pending); err != nil {
			return err
		}
	}
	n.window, n.view, n.pending = w, 0, 0
	return nil
}

// allow decides one request at t on node i.
func (s *staleCache) allow(ctx context.Context, i int, t int64) (bool, error) {
	if s.every > 0 {
		// Syncs are timer-driven, on every node, whether or not it receives
		// traffic: run all that are due by t, in time order, since one node's
		// push changes what another pulls.
		for {
			next := -1
			for j := range s.nodes {
				if s.nodes[j].nextSync <= t && (next < 0 || s.nodes[j].nextSync < s.nodes[next].nextSync) {
					next = j
				}
			}
			if next < 0 {
				break
			}
			n := &s.nodes[next]
			if err := s.sync(ctx, n, n.nextSync); err != nil {
				return false, err
			}
			n.nextSync += s.every
		}
	}
	n := &s.nodes[i]
	if s.every == 0 {
		if err := s.sync(ctx, n, t); err != nil { // pull
			return false, err
		}
	} else if err := s.roll(ctx, n, t); err != nil {
		return false, err
	}
	if n.view >= s.limit {
		return false, nil
	}
	n.view++
	n.pending++
	if s.every == 0 {
		return true, s.sync(ctx, n, t) // push
	}
	return true, nil
}

// runStaleCache sweeps the naive cached counter over the sync intervals and
// compares it with Sluice's atomic store on the same traffic.
func runStaleCache(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	period := micros(o.Period)
	start := virtualStart(period)
	traffic := steadyTraffic(start, period, o.Limit, o.Nodes, o.Windows)
	sent := int64(len(traffic))
	r := &Report{Span: spanAligned + "; bound L (fixed_window)"}

	for k, every := range o.Sync {
		s := &staleCache{c: e.counter(fmt.Sprintf("stale-%d", k)), period: period, limit: o.Limit,
			every: micros(every), nodes: make([]cachedNode, o.Nodes)}
		for i := range s.nodes {
			// Nodes start at different moments, so their syncs are spread
			// over the interval rather than all at once.
			s.nodes[i] = cachedNode{window: start / period, nextSync: start + int64(i)*s.every/int64(o.Nodes)}
		}
		var admitted []int64
		for _, a := range traffic {
			ok, err := s.allow(ctx, a.node, a.t)
			if err != nil {
				return nil, err
			}
			if ok {
				admitted = append(admitted, a.t)
			}
		}
		row := newRow(sluice.FixedWindow, fmt.Sprintf("naive: cached counter, sync %v", every), o.Nodes, sent,
			int64(len(admitted)), maxAligned(admitted, period), o.Limit)
		row.Naive, row.Sync = true, every
		r.Rows = append(r.Rows, row)
	}

	p, err := e.policy("lab-stale", sluice.FixedWindow)
	if err != nil {
		return nil, err
	}
	clock := newVClock(start)
	st := e.store("stale-atomic", clock)
	var admitted []int64
	for _, a := range traffic {
		clock.set(a.t)
		ok, err := decide(ctx, st, p, "k")
		if err != nil {
			return nil, err
		}
		if ok {
			admitted = append(admitted, a.t)
		}
	}
	r.Rows = append(r.Rows, newRow(sluice.FixedWindow, "sluice: atomic store", o.Nodes, sent, int64(len(admitted)), maxAligned(admitted, period), o.Limit))

	worst := Row{}
	for _, row := range r.Rows {
		if row.Naive && row.Overshoot >= worst.Overshoot {
			worst = row
		}
	}
	r.Summary = fmt.Sprintf("Nodes admitting against a cached count that syncs every S overshoot more the longer S is — up to %.2f× at S = %v — while the atomic store stays at %.2f×.",
		worst.Overshoot, worst.Sync, r.Rows[len(r.Rows)-1].Overshoot)
	return r, nil
}
