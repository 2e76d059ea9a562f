package memory

import (
	"unsafe"

	"github.com/sluicehq/sluice"
)

// coldTable is a shard's compact part: the states of keys the exact part had
// no room for, 16 bytes each (and a floor per 16) instead of an entry's 256
// and more, without the key itself. It is allocated when the shard first needs it and never grows.
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
	buckets []coldBucket
	floors  []coldFloor // one per bucket
	folded  bool        // a floor holds anything: loads read floors only then
	held    int         // slots holding a state (or an expired one not yet reused)
	// until is when the last state written here expires: from then on the
	// table holds nothing and lookups skip it, so a flood that has passed
	// costs new keys nothing.
	until int64
}

// coldBucket is coldBucketSlots states, 16 bytes each, laid out so that a
// lookup reads one cache line of keys, then only its own slot's time and x.
type coldBucket struct {
	keys  [coldBucketSlots]uint32 // the policy's id<<16 | the fingerprint; 0: empty (ids start at 1)
	xs    [coldBucketSlots]uint32
	times [coldBucketSlots]int64
}

// coldFloor holds, for the keys folded into a bucket, a state no less than
// any of theirs: for the buckets (token_bucket, leaky_bucket, gcra) the
// latest time one is full again; for the windows and the log, the most units
// any held, counted at the latest time any held them. Only the keys of the
// policies folded into it read it (all of them once more than two were), each
// under its own policy, so it only ever over-counts the others.
type coldFloor struct {
	tat, units, at int64
	until          int64     // when the last state folded here expires: read only before then
	ids            [2]uint16 // the policies whose states were folded here; 0: none yet
	mixed          bool      // a third one was too: every key of the bucket reads it
}

// note records that a state of the policy id was folded into f.
func (f *coldFloor) note(id uint32) {
	switch {
	case f.holds(id) && !f.mixed:
	case f.ids[0] == 0:
		f.ids[0] = uint16(id)
	case f.ids[1] == 0:
		f.ids[1] = uint16(id)
	default:
		f.mixed = true
	}
}

// holds reports whether a state of the policy id may have been folded into f.
func (f *coldFloor) holds(id uint32) bool {
	return f.mixed || f.ids[0] == uint16(id) || f.ids[1] == uint16(id)
}

const (
	coldBucketSlots = 16
	// coldBucketBytes is what one bucket costs: its slots and its floor.
	coldBucketBytes = int64(unsafe.Sizeof(coldBucket{})) + int64(unsafe.Sizeof(coldFloor{}))
)

func newColdTable(buckets int) *coldTable {
	return &coldTable{buckets: make([]coldBucket, buckets), floors: make([]coldFloor, buckets)}
}

// coldRef is where one key's state is, or goes, in a shard's compact part.
// A slot is numbered b*coldBucketSlots + its index in bucket b.
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
	n := uint64(len(t.buckets))
	r := coldRef{id: id, b1: int(uint64(uint32(z)) * n >> 32), b2: int(z >> 32 * n >> 32), fp: uint16(h >> 16), match: -1}
	// Both buckets' keys in one pass, so that the two cache misses overlap.
	want, keys1, keys2 := r.key(), &t.buckets[r.b1].keys, &t.buckets[r.b2].keys
	for k := range coldBucketSlots {
		if keys1[k] == want {
			r.match = r.b1*coldBucketSlots + k
			break
		}
		if keys2[k] == want && r.match < 0 {
			r.match = r.b2*coldBucketSlots + k
		}
	}
	return r
}

// key is what a slot of r's key holds in keys.
func (r *coldRef) key() uint32 { return r.id<<16 | uint32(r.fp) }

// next returns the first slot after j in r's buckets that r's key may own, or -1.
func (t *coldTable) next(r *coldRef, j int) int {
	want := r.key()
	b, k := r.b1, 0
	if j >= 0 {
		b, k = j/coldBucketSlots, j%coldBucketSlots+1
	}
	for {
		keys := &t.buckets[b].keys
		for ; k < coldBucketSlots; k++ {
			if keys[k] == want {
				return b*coldBucketSlots + k
			}
		}
		if b != r.b1 || r.b2 == r.b1 {
			return -1
		}
		b, k = r.b2, 0
	}
}

// at returns slot j's bucket and index in it.
func (t *coldTable) at(j int) (*coldBucket, int) {
	return &t.buckets[j/coldBucketSlots], j % coldBucketSlots
}

// state returns what slot j holds.
func (t *coldTable) state(j int) coldState {
	b, k := t.at(j)
	return coldState{time: b.times[k], x: b.xs[k]}
}

// load writes into *st the state of r's key under p at now: every slot it may
// own and both buckets' floors, merged. It reports whether any held a state.
func (t *coldTable) load(r *coldRef, p *sluice.Policy, alg uint8, now int64, st *sluice.State) bool {
	found := false
	var other sluice.State
	for j := r.match; j >= 0; j = t.next(r, j) {
		if !found {
			t.state(j).decode(p, alg, now, st)
			found = true
			continue
		}
		t.state(j).decode(p, alg, now, &other)
		merge(p, alg, now, st, &other)
	}
	if !t.folded {
		return found
	}
	buckets := []int{r.b1, r.b2}
	if r.b2 == r.b1 {
		buckets = buckets[:1]
	}
	for _, b := range buckets {
		if !t.floors[b].state(r.id, alg, now, &other) {
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

// state writes into *st what f holds for keys of the policy id, of alg, at
// now, and reports whether that is anything.
func (f *coldFloor) state(id uint32, alg uint8, now int64, st *sluice.State) bool {
	switch {
	case f.until <= now || !f.holds(id):
		return false
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
	for j := r.match; j >= 0; j = t.next(r, j) {
		t.free(j)
	}
	r.match = -1
}

// clearExpired forgets the slots r's key may own whose state has expired
// under every policy of the name: for a key found back to initial. (Its
// policy saying so is not enough: another key sharing a slot may read it
// under a longer period.)
func (t *coldTable) clearExpired(ids *coldIDs, r *coldRef, now int64) {
	for j := r.match; j >= 0; j = t.next(r, j) {
		if t.expires(ids, j) <= now {
			t.free(j)
		}
	}
}

// free empties slot j.
func (t *coldTable) free(j int) {
	b, k := t.at(j)
	b.keys[k], b.xs[k], b.times[k] = 0, 0, 0
	t.held--
}

// expires returns when the state slot j holds is back to initial, at the latest.
func (t *coldTable) expires(ids *coldIDs, j int) int64 {
	b, k := t.at(j)
	return b.times[k] + ids.get(b.keys[k]>>16).span.Load()
}

// keptUntil returns until when the slots the key of hash h under the policy
// id may own are kept (0: none).
func (t *coldTable) keptUntil(ids *coldIDs, h uint64, id uint32) int64 {
	if id == 0 {
		return 0
	}
	until, r := int64(0), t.ref(h, id)
	for j := r.match; j >= 0; j = t.next(&r, j) {
		until = max(until, t.expires(ids, j))
	}
	return until
}

// fold adds the state of slot j to its bucket's floor and frees the slot.
func (t *coldTable) fold(ids *coldIDs, j int) {
	b, k := t.at(j)
	id := b.keys[k] >> 16
	alg, c, f := ids.get(id).alg, t.state(j), &t.floors[j/coldBucketSlots]
	if isBucket(alg) {
		f.tat = max(f.tat, c.time)
	} else {
		f.units, f.at = max(f.units, c.units(alg)), max(f.at, c.time)
	}
	f.until = max(f.until, t.expires(ids, j))
	f.note(id)
	t.folded = true
	t.free(j)
}

// foldState adds st, a state of the policy id, of alg, with no compact form
// and that expires at expires, to bucket b's floor.
func (t *coldTable) foldState(id uint32, alg uint8, st *sluice.State, b int, expires int64) {
	f := &t.floors[b]
	f.note(id)
	if isBucket(alg) {
		f.tat = max(f.tat, tatOf(alg, st))
	} else {
		n, at := units(alg, st)
		f.units, f.at = max(f.units, n), max(f.at, at)
	}
	f.until = max(f.until, expires)
	t.until = max(t.until, expires)
	t.folded = true
}

// take returns a free slot for r's key: in the emptier of its buckets, an
// empty one or one whose state has expired. When both are full it folds one
// into its floor (folded reports it), the one that harms the other keys of
// its bucket least: one the floor already covers, else the fewest units, else
// the first to expire (for the buckets, whose units it cannot tell, the first
// to be full again).
func (t *coldTable) take(ids *coldIDs, r *coldRef, now int64) (j int, folded bool) {
	best, bestFree := -1, -1
	var victim foldCost
	for _, b := range [2]int{r.b1, r.b2} {
		free, first := 0, -1
		for k, key := range &t.buckets[b].keys {
			j := b*coldBucketSlots + k
			if key == 0 {
				free++
				if first < 0 {
					first = j
				}
				continue
			}
			cp := ids.get(key >> 16)
			c := t.state(j)
			if exp := c.time + cp.span.Load(); exp > now {
				victim = victim.min(t.foldCost(key>>16, cp.alg, j, c, exp))
				continue
			}
			free++
			if first < 0 {
				first = j
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
	t.fold(ids, victim.slot)
	return victim.slot, true
}

// foldCost is what folding a slot costs the other keys of its bucket.
type foldCost struct {
	slot    int
	set     bool  // false: no slot yet
	raises  bool  // the floor does not cover its state yet
	units   int64 // a window's or log's units (0 for the buckets)
	expires int64
}

// foldCost returns the cost of folding slot j, which holds c, a state of the
// policy id, of alg, live until expires.
func (t *coldTable) foldCost(id uint32, alg uint8, j int, c coldState, expires int64) foldCost {
	f := &t.floors[j/coldBucketSlots]
	fc := foldCost{slot: j, set: true, expires: expires, raises: !f.holds(id)}
	if isBucket(alg) {
		fc.raises = fc.raises || c.time > f.tat
	} else {
		fc.units = c.units(alg)
		fc.raises = fc.raises || fc.units > f.units || c.time > f.at
	}
	return fc
}

// min returns the cheaper of a and b.
func (a foldCost) min(b foldCost) foldCost {
	switch {
	case !a.set:
		return b
	case a.raises != b.raises:
		if a.raises {
			return b
		}
		return a
	case a.units != b.units:
		if b.units < a.units {
			return b
		}
		return a
	case b.expires < a.expires:
		return b
	}
	return a
}

// put writes c, a state of r's key that expires at expires, into slot j.
func (t *coldTable) put(r *coldRef, j int, c coldState, expires int64) {
	b, k := t.at(j)
	if b.keys[k] == 0 {
		t.held++
	}
	b.keys[k], b.xs[k], b.times[k] = r.key(), c.x, c.time
	t.until = max(t.until, expires)
}

// live reports whether t may hold a state at now.
func (t *coldTable) live(now int64) bool { return t != nil && t.until > now }
