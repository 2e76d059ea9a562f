package lease

import (
	"hash/maphash"
	"math"
)

// leaseMin is the fewest requests a key must have asked for within one TTL
// before it is leased. A lease costs a reservation (and sometimes a
// release), so below a few requests per TTL it saves nothing: such a key's
// requests go to the store as they come, one call each, as without leases.
const leaseMin = 3

// demand estimates what a key asks for in one TTL d, from what it asked in
// the current and the previous window of length d read as a sliding window
// (the sliding_window algorithm's approximation): requests, to tell whether
// leasing pays, and units, to size a lease. It costs a few integer
// operations per request and no allocation.
type demand struct {
	d            int64 // µs: the window, the key's TTL when last asked; 0: never asked
	start        int64 // µs: the current window's start
	first        int64 // µs: the key's first request since it was last idle for a window
	reqs, units  int64 // asked in the current window
	preqs, punit int64 // asked in the previous one
}

// add counts a request of n units at now.
func (m *demand) add(n, now, d int64) {
	if m.d != d { // a new key, or a policy whose TTL changed: start over
		*m = demand{d: d, start: now, first: now}
	}
	m.roll(now)
	if m.reqs == 0 && m.preqs == 0 { // idle for a window or more: a new run of requests
		m.first = now
	}
	m.reqs++
	m.units += n
}

// roll moves the windows on to the one holding now.
func (m *demand) roll(now int64) {
	e := now - m.start
	if e < m.d || m.d == 0 {
		return
	}
	if e < 2*m.d {
		m.preqs, m.punit = m.reqs, m.units
	} else {
		m.preqs, m.punit = 0, 0
	}
	m.reqs, m.units = 0, 0
	m.start = now - e%m.d
}

// weight is the share of the previous window that falls within d of now.
func (m *demand) weight(now int64) float64 {
	return float64(m.d-min(m.d, max(0, now-m.start))) / float64(m.d)
}

// requests is how many requests the key made in the last d, about.
func (m *demand) requests(now int64) float64 {
	if m.d == 0 {
		return 0
	}
	m.roll(now)
	return float64(m.reqs) + float64(m.preqs)*m.weight(now)
}

// most is the most units a lease taken now may hold: what the key asked
// for since it was first seen, while that was less than d ago; no bound
// after. A key's activity may end at any time (a client that leaves, a
// load that stops), and the longer it has lasted, the likelier it goes on:
// three requests in a second say the next second brings about as many,
// not that the next minute brings a hundred. So a warming key's leases
// grow with it — each at most what it asked so far — and never hold much
// more than it will use.
func (m *demand) most(now int64) int64 {
	if now-m.first < m.d {
		return m.units + m.punit
	}
	return math.MaxInt64
}

// warm reports whether leasing the key pays: it asked leaseMin times or more
// within the last d.
func (m *demand) warm(now int64) bool { return m.requests(now) >= leaseMin }

// over is how many units the key is expected to ask for in the span µs
// from now: its rate in units (over the time it has been seen when that is
// less than d, else over the last d) times span, at most most(now). A
// burst of a few requests must not lease a lot: a hot key's next leases
// follow the rate it spends them at.
func (m *demand) over(now, span int64) int64 {
	if m.d == 0 {
		return 0
	}
	m.roll(now)
	if seen := now - m.first; seen < m.d {
		units := m.units + m.punit
		return int64(min(float64(units)*float64(span)/float64(max(1, seen)), float64(units)))
	}
	return int64((float64(m.units) + float64(m.punit)*m.weight(now)) * float64(span) / float64(m.d))
}

// coldSets is how many pairs of slots a shard keeps the demand of keys
// without a lease in (a power of two): such a key takes no lease, only a
// slot here, and it is leased once its slot shows it warm. 64 shards of 512
// pairs of 64-byte slots hold 4 MB.
const coldSets = 512

// coldTable holds the demand estimates of keys without a lease, in one of
// two adjacent slots per key (a decision reads one or two neighbouring
// cache lines, not two far apart). A key that loses its slot to another
// only starts its estimate over: it is leased later, never wrongly. A key
// with a slot has no lease: the slot is dropped when the key is leased.
type coldTable struct {
	sets [][2]coldSlot // allocated on first use
}

type coldSlot struct {
	tag uint64 // the key's; 0: free
	demand
}

// lookup returns the estimate of the key tagged tag, nil when it has none.
func (t *coldTable) lookup(tag uint64) *demand {
	if t.sets == nil {
		return nil
	}
	set := &t.sets[tag%coldSets]
	switch tag {
	case set[0].tag:
		return &set[0].demand
	case set[1].tag:
		return &set[1].demand
	}
	return nil
}

// insert gives the key tagged tag (not 0, without a slot) the less busy of
// its two slots at now, and returns its estimate, empty.
func (t *coldTable) insert(tag uint64, now int64) *demand {
	if t.sets == nil {
		t.sets = make([][2]coldSlot, coldSets)
	}
	set := &t.sets[tag%coldSets]
	s := &set[0]
	if set[1].requests(now) < s.requests(now) {
		s = &set[1]
	}
	*s = coldSlot{tag: tag}
	return &s.demand
}

// drop frees the slot of the key tagged tag, now leased.
func (t *coldTable) drop(tag uint64) {
	if t.sets == nil {
		return
	}
	set := &t.sets[tag%coldSets]
	for i := range set {
		if set[i].tag == tag {
			set[i] = coldSlot{}
		}
	}
}

// coldTag names (policy, key) in a coldTable: h is the key's hash, which
// also picks its shard.
func (s *Store) coldTag(h uint64, policy string) uint64 {
	return (h>>6 ^ maphash.String(s.seed, policy)*0x9e3779b97f4a7c15) | 1
}
