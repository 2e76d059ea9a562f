package memory

import (
	"unsafe"

	"github.com/sluicehq/sluice"
)

// coldTable is a shard's compact part: the states of keys the exact part had
// no room for, 16 bytes each instead of an entry's 256 and more, without the
// key itself. It is allocated when the shard first needs it and never grows.
//
// A key's state may be in either of two buckets of coldBucketSlots slots,
// picked from its hash, with a 16-bit fingerprint of the hash and its
// policy's id (coldIDs). New states go to the emptier bucket, so the table
// fills evenly before any bucket overflows. Keys whose policy, fingerprint
// and buckets are all the same cannot be told apart: they share what they
// find, which is never less than either's own state (every write follows a
// read of all the key's slots, and an admission only adds to what was read),
// so a shared slot can only over-count.
//
// When both of a new key's buckets are full, the slot closest to its expiry
// is folded into its bucket's floor (coldFloor), which every key of the
// bucket then reads as part of its state: the one approximation, and it only
// ever counts more.
type coldTable struct {
	slots  []coldSlot  // bucket b's slots are slots[b*coldBucketSlots:][:coldBucketSlots]
	floors []coldFloor // one per bucket
	held   int         // slots holding a state (or an expired one not yet reused)
}

// coldSlot is one state: meta is the policy's id<<48 | the fingerprint<<32 |
// x (0 for an empty slot: ids start at 1).
type coldSlot struct {
	time int64
	meta uint64
}

// coldFloor holds, for the keys folded into a bucket, a state no less than
// any of theirs: for the buckets (token_bucket, leaky_bucket, gcra) the
// latest time one is full again; for the windows and the log, the most units
// any held, counted at the latest time any held them. Read under each
// reader's own policy, it only ever over-counts the others.
type coldFloor struct {
	tat, units, at int64
}

const (
	coldBucketSlots = 16
	// coldBucketBytes is what one bucket costs: its slots and its floor.
	coldBucketBytes = coldBucketSlots*int64(unsafe.Sizeof(coldSlot{})) + int64(unsafe.Sizeof(coldFloor{}))
)

func newColdTable(buckets int) *coldTable {
	return &coldTable{slots: make([]coldSlot, buckets*coldBucketSlots), floors: make([]coldFloor, buckets)}
}

// coldRef is where one key's state is, or goes, in a shard's compact part.
type coldRef struct {
	id     uint32 // the policy's coldIDs id; 0: none, the key has no compact state
	b1, b2 int    // its buckets
	fp     uint16
	match  int // the first slot holding its state; -1: none
}

// ref returns where the key of hash h under the policy id is.
func (t *coldTable) ref(h uint64, id uint32) coldRef {
	// The hash's low bits picked the shard and its high ones the exact
	// index's slot; a mix of all of them picks the buckets.
	z := (h ^ h>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	n := uint64(len(t.floors))
	r := coldRef{id: id, b1: int(uint64(uint32(z)) * n >> 32), b2: int(z >> 32 * n >> 32), fp: uint16(h >> 16), match: -1}
	r.match = t.next(&r, -1)
	return r
}

// key is what a slot of r's key holds above x.
func (r *coldRef) key() uint64 { return uint64(r.id)<<48 | uint64(r.fp)<<32 }

// next returns the first slot after i in r's buckets that r's key may own, or -1.
func (t *coldTable) next(r *coldRef, i int) int {
	want := r.key()
	for i++; i < 2*coldBucketSlots; i++ {
		b := r.b1
		if i >= coldBucketSlots {
			if r.b2 == r.b1 {
				break
			}
			b = r.b2
		}
		j := b*coldBucketSlots + i%coldBucketSlots
		if t.slots[j].meta&^0xFFFFFFFF == want {
			return j
		}
	}
	return -1
}

// slotIndex returns which of the (up to) 32 slots of r's buckets j is.
func (r *coldRef) slotIndex(j int) int {
	if j/coldBucketSlots == r.b1 {
		return j % coldBucketSlots
	}
	return coldBucketSlots + j%coldBucketSlots
}

// state returns what slot j holds.
func (t *coldTable) state(j int) coldState {
	return coldState{time: t.slots[j].time, x: uint32(t.slots[j].meta)}
}

// load writes into *st the state of r's key under p at now: every slot it may
// own and both buckets' floors, merged. It reports whether any held a state.
func (t *coldTable) load(r *coldRef, p *sluice.Policy, alg uint8, now int64, st *sluice.State) bool {
	found := false
	var other sluice.State
	for j := r.match; j >= 0; j = t.next(r, r.slotIndex(j)) {
		if !found {
			t.state(j).decode(p, alg, now, st)
			found = true
			continue
		}
		t.state(j).decode(p, alg, now, &other)
		merge(p, alg, now, st, &other)
	}
	buckets := []int{r.b1, r.b2}
	if r.b2 == r.b1 {
		buckets = buckets[:1]
	}
	for _, b := range buckets {
		if !t.floors[b].state(alg, now, &other) {
			continue
		}
		if found {
			merge(p, alg, now, st, &other)
		} else {
			*st, found = other, true
		}
	}
	return found
}

// state writes into *st what f holds for keys of alg at now, and reports
// whether that is anything.
func (f *coldFloor) state(alg uint8, now int64, st *sluice.State) bool {
	switch {
	case isBucket(alg) && f.tat > now:
		bucketAt(alg, f.tat, now, st)
	case !isBucket(alg) && f.units > 0:
		unitsAt(alg, f.units, f.at, st)
	default:
		return false
	}
	return true
}

// clear forgets every slot r's key may own (Reset: another key's it shares
// them with too).
func (t *coldTable) clear(r *coldRef) {
	for j := r.match; j >= 0; j = t.next(r, r.slotIndex(j)) {
		t.slots[j] = coldSlot{}
		t.held--
	}
	r.match = -1
}

// clearExpired forgets the slots r's key may own whose state has expired
// under every policy of the name: for a key found back to initial. (Its
// policy saying so is not enough: another key sharing a slot may read it
// under a longer period.)
func (t *coldTable) clearExpired(ids *coldIDs, r *coldRef, now int64) {
	for j := r.match; j >= 0; j = t.next(r, r.slotIndex(j)) {
		if t.expires(ids, j) <= now {
			t.slots[j] = coldSlot{}
			t.held--
		}
	}
}

// expires returns when the state slot j holds is back to initial, at the latest.
func (t *coldTable) expires(ids *coldIDs, j int) int64 {
	cp := ids.get(uint32(t.slots[j].meta >> 48))
	return t.slots[j].time + cp.span.Load()
}

// keptUntil returns until when the slots the key of hash h under the policy
// id may own are kept (0: none).
func (t *coldTable) keptUntil(ids *coldIDs, h uint64, id uint32) int64 {
	if id == 0 {
		return 0
	}
	until, r := int64(0), t.ref(h, id)
	for j := r.match; j >= 0; j = t.next(&r, r.slotIndex(j)) {
		until = max(until, t.expires(ids, j))
	}
	return until
}

// fold adds the state of slot j, in bucket b, to b's floor and frees the slot.
func (t *coldTable) fold(ids *coldIDs, j, b int) {
	alg := ids.get(uint32(t.slots[j].meta >> 48)).alg
	c, f := t.state(j), &t.floors[b]
	if isBucket(alg) {
		f.tat = max(f.tat, c.time)
	} else {
		f.units, f.at = max(f.units, c.units(alg)), max(f.at, c.time)
	}
	t.slots[j] = coldSlot{}
	t.held--
}

// foldState adds st, a state of alg with no compact form, to bucket b's floor.
func (t *coldTable) foldState(alg uint8, st *sluice.State, b int) {
	f := &t.floors[b]
	if isBucket(alg) {
		f.tat = max(f.tat, tatOf(alg, st))
		return
	}
	n, at := units(alg, st)
	f.units, f.at = max(f.units, n), max(f.at, at)
}

// take returns a free slot for r's key: in the emptier of its buckets, an
// empty one or one whose state has expired; when both are full, the slot
// that would expire first, folded into its floor (folded reports it).
func (t *coldTable) take(ids *coldIDs, r *coldRef, now int64) (j int, folded bool) {
	best, bestFree := -1, -1
	victim, victimBucket, victimExpires := -1, -1, int64(0)
	for _, b := range [2]int{r.b1, r.b2} {
		free, first := 0, -1
		for j := b * coldBucketSlots; j < (b+1)*coldBucketSlots; j++ {
			if t.slots[j].meta == 0 {
				free++
				if first < 0 {
					first = j
				}
				continue
			}
			switch exp := t.expires(ids, j); {
			case exp <= now:
				free++
				if first < 0 {
					first = j
				}
			case victim < 0 || exp < victimExpires:
				victim, victimBucket, victimExpires = j, b, exp
			}
		}
		if free > bestFree && first >= 0 {
			best, bestFree = first, free
		}
		if r.b2 == r.b1 {
			break
		}
	}
	if best >= 0 {
		return best, false
	}
	t.fold(ids, victim, victimBucket)
	return victim, true
}

// put writes c, a state of r's key, into slot j.
func (t *coldTable) put(r *coldRef, j int, c coldState) {
	if t.slots[j].meta == 0 {
		t.held++
	}
	t.slots[j] = coldSlot{time: c.time, meta: r.key() | uint64(c.x)}
}
