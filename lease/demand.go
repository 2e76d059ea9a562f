package lease

import "hash/maphash"

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
	reqs, units  int64 // asked in the current window
	preqs, punit int64 // asked in the previous one
}

// add counts a request of n units at now.
func (m *demand) add(n, now, d int64) {
	if m.d != d { // a new key, or a policy whose TTL changed: start over
		*m = demand{d: d, start: now}
	}
	m.roll(now)
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

// warm reports whether leasing the key pays: it asked leaseMin times or more
// within the last d.
func (m *demand) warm(now int64) bool { return m.requests(now) >= leaseMin }

// over is how many units the key is expected to ask for in the span µs
// from now: what it asked in the last d, pro rata. A key seen for
// less than d (nothing in the previous window) has its rate taken over the
// time it has been seen, but is expected to ask for at most what it asked:
// a burst of a few requests must not lease a lot (a hot key's next leases
// follow the rate it spends them at).
func (m *demand) over(now, span int64) int64 {
	if m.d == 0 {
		return 0
	}
	m.roll(now)
	if m.punit == 0 {
		seen := max(1, now-m.start)
		return int64(min(float64(m.units)*float64(span)/float64(seen), float64(m.units)))
	}
	return int64((float64(m.units) + float64(m.punit)*m.weight(now)) * float64(span) / float64(m.d))
}

// coldSlots is how many keys a shard estimates the demand of without leasing
// them (a power of two): the keys too cold to lease take no lease, only a
// slot here, and a key is leased once its slot shows it warm. 64 shards of
// 1,024 slots hold about 3.7 MB.
const coldSlots = 1024

// coldTable holds the demand estimates of keys without a lease, two
// candidate slots per key. A key that loses its slot to another only starts
// its estimate over: it is leased later, never wrongly.
type coldTable struct {
	slots []coldSlot // allocated on first use
}

type coldSlot struct {
	tag uint64 // the key's; 0: free
	demand
}

// find returns the estimate of the key tagged tag (not 0) at now, taking the
// less busy of its two slots when it has none.
func (t *coldTable) find(tag uint64, now int64) *demand {
	if t.slots == nil {
		t.slots = make([]coldSlot, coldSlots)
	}
	a, b := &t.slots[tag%coldSlots], &t.slots[(tag>>32)%coldSlots]
	switch {
	case a.tag == tag:
		return &a.demand
	case b.tag == tag:
		return &b.demand
	}
	if b.requests(now) < a.requests(now) {
		a = b
	}
	*a = coldSlot{tag: tag}
	return &a.demand
}

// drop frees the slot of the key tagged tag, now leased.
func (t *coldTable) drop(tag uint64) {
	for _, i := range [2]uint64{tag % coldSlots, (tag >> 32) % coldSlots} {
		if t.slots[i].tag == tag {
			t.slots[i] = coldSlot{}
		}
	}
}

// coldTag names (policy, key) in a coldTable: h is the key's hash, which
// also picks its shard.
func (s *Store) coldTag(h uint64, policy string) uint64 {
	return (h>>6 ^ maphash.String(s.seed, policy)*0x9e3779b97f4a7c15) | 1
}
