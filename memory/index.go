package memory

// index maps an entry's 64-bit hash to its position in the store's arena.
// It is an open-addressing table with linear probing: a lookup
// usually reads one cache line of slots and then the entry itself, where a Go
// map of the same keys costs a generic call and its own group layout (about a
// fifth of a decision with 10,000 keys).
//
// A slot holds the tag, the hash's high 32 bits, which also picks the home
// slot, and the position plus one; 0 is an empty slot. Entries whose hashes
// share a tag, or even the whole hash, simply probe on: find compares the
// entries themselves, so no key is ever taken for another.
type index struct {
	slots []uint64
	used  int
}

const minIndexSlots = 16

// tagOf is the part of a hash the index keeps (the low bits pick the shard).
func tagOf(h uint64) uint32 { return uint32(h >> 32) }

func slotOf(tag uint32, pos int32) uint64 { return uint64(tag)<<32 | uint64(uint32(pos)+1) }

func slotPos(slot uint64) int32 { return int32(uint32(slot) - 1) }

// home is where the probe for a slot's tag starts.
func (x *index) home(slot uint64) int { return int(slot>>32) & (len(x.slots) - 1) }

// add records that an entry of tag is at pos.
func (x *index) add(tag uint32, pos int32) {
	// At most half full keeps probe sequences short.
	if 2*(x.used+1) > len(x.slots) {
		x.grow()
	}
	x.put(slotOf(tag, pos))
	x.used++
}

func (x *index) put(slot uint64) {
	mask := len(x.slots) - 1
	i := x.home(slot)
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = slot
}

func (x *index) grow() {
	old := x.slots
	x.slots = make([]uint64, max(minIndexSlots, 2*len(old)))
	for _, slot := range old {
		if slot != 0 {
			x.put(slot)
		}
	}
}

// locate returns where the slot recording (tag, pos) is. It must be there.
func (x *index) locate(tag uint32, pos int32) int {
	want, mask := slotOf(tag, pos), len(x.slots)-1
	i := x.home(want)
	for x.slots[i] != want {
		i = (i + 1) & mask
	}
	return i
}

// remove forgets that an entry of tag is at pos, shifting the slots after
// it back so that no probe sequence has a hole (no tombstones).
func (x *index) remove(tag uint32, pos int32) {
	mask := len(x.slots) - 1
	hole := x.locate(tag, pos)
	for j := hole; ; {
		j = (j + 1) & mask
		slot := x.slots[j]
		if slot == 0 {
			break
		}
		// The slot at j may fill the hole unless its home lies cyclically
		// in (hole, j]: then its probe never passes the hole.
		if k := x.home(slot); (j-k)&mask >= (j-hole)&mask {
			x.slots[hole] = slot
			hole = j
		}
	}
	x.slots[hole] = 0
	x.used--
}
