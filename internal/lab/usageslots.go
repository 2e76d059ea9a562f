package lab

import (
	"context"

	"github.com/sluicehq/sluice"
)

// slotHolder is one simulated node holding in-flight slots.
type slotHolder struct {
	ends  []int64 // when each request it runs ends, µs
	slots []*sluice.Slot
}

// usageSlots compares, for a concurrency limit of L slots that N nodes
// share, a counter incremented when a request starts and decremented when
// it ends with Sluice's slots, which return by themselves after their lease
// (the policy's Period). Each node keeps up to L/(N−1) + 1 requests of P/5 in
// flight; one lease in, node 0 is killed while holding its slots and never
// releases them. The rows report the most in flight ÷ L, and the slots
// still unusable once a lease and a request have passed since the kill.
func usageSlots(ctx context.Context, e *env, r *Report) error {
	o := e.opts
	lease := micros(o.Period)
	p := &sluice.Policy{Name: "lab-slots", Algorithm: sluice.Concurrency, Limit: min(o.Limit, sluice.MaxConcurrencyLimit), Period: o.Period}
	if err := p.Validate(); err != nil {
		return err
	}
	limit := p.Limit
	start := virtualStart(lease)
	windows := max(o.Windows, 3)
	step, hold := max(lease/100, 1), max(lease/5, 1)
	kill, end := start+lease, start+int64(windows)*lease
	// Enough that the nodes left after the kill can hold all L between them.
	perNode := limit/int64(max(o.Nodes-1, 1)) + 1

	// run drives the nodes; acquire takes a slot (nil, false when denied)
	// and release gives one back.
	type variant struct {
		name    string
		acquire func() (*sluice.Slot, bool, error)
		release func(*sluice.Slot) error
	}
	c := e.counter("usage-slots")
	clock := newVClock(start)
	var sent, admitted int64
	run := func(v variant) (most, leaked int64, err error) {
		sent, admitted = 0, 0
		nodes := make([]slotHolder, o.Nodes)
		recovered := kill + lease + hold
		leaked = limit
		for now := start; now < end; now += step {
			clock.set(now)
			for i := range nodes {
				n := &nodes[i]
				if i == 0 && now >= kill {
					continue // killed: holds its slots and releases nothing
				}
				kept := 0
				for j, t := range n.ends {
					if t > now {
						n.ends[kept], n.slots[kept] = t, n.slots[j]
						kept++
						continue
					}
					if err := v.release(n.slots[j]); err != nil {
						return 0, 0, err
					}
				}
				n.ends, n.slots = n.ends[:kept], n.slots[:kept]
				for int64(len(n.ends)) < perNode {
					s, ok, err := v.acquire()
					if err != nil {
						return 0, 0, err
					}
					sent++
					if !ok {
						break
					}
					admitted++
					n.ends, n.slots = append(n.ends, now+hold), append(n.slots, s)
				}
			}
			// The killed node's requests died with it: in flight are the
			// live nodes' requests.
			live := int64(0)
			for i, n := range nodes {
				if i != 0 || now < kill {
					live += int64(len(n.ends))
				}
			}
			most = max(most, live)
			if now >= recovered {
				leaked = min(leaked, limit-live)
			}
		}
		return most, leaked, nil
	}

	lim, err := sluice.New(e.store("usage-slots", clock), *p)
	if err != nil {
		return err
	}
	for _, v := range []variant{{
		name: "naive: a counter incremented on start, decremented on end",
		acquire: func() (*sluice.Slot, bool, error) {
			n, err := c.incrBy(ctx, "k", 1)
			if err != nil || n <= limit {
				return nil, err == nil, err
			}
			_, err = c.incrBy(ctx, "k", -1)
			return nil, false, err
		},
		release: func(*sluice.Slot) error {
			_, err := c.incrBy(ctx, "k", -1)
			return err
		},
	}, {
		name: "sluice: slots with a lease",
		acquire: func() (*sluice.Slot, bool, error) {
			res, s, err := lim.Acquire(ctx, "k")
			return s, res.Allowed, err
		},
		release: func(s *sluice.Slot) error {
			_, err := s.Release(ctx)
			return err
		},
	}} {
		most, leaked, err := run(v)
		if err != nil {
			return err
		}
		row := newRow(sluice.Concurrency, v.name, o.Nodes, sent, admitted, most, limit)
		row.Naive = v.name[:5] == "naive"
		l := leaked
		row.LeakedSlots = &l
		r.Rows = append(r.Rows, row)
	}
	return nil
}
