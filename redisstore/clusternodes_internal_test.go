package redisstore

import (
	"encoding/binary"
	"testing"
)

// FuzzSlotTable: whatever ranges a node reports — out of bounds, reversed,
// overlapping — newSlotTable never panics; every slot goes to the last valid
// range covering it, and a slot none covers keeps its master from the map
// before.
func FuzzSlotTable(f *testing.F) {
	f.Add([]byte{0, 0, 0x3f, 0xff, 1}, []byte{0, 0, 0x1f, 0xff, 2})
	f.Add([]byte{0x20, 0, 0x10, 0, 1, 0xff, 0xff, 0x40, 0, 2}, []byte{})
	f.Add([]byte{0, 5, 0, 5, 3, 0, 5, 0, 6, 4}, []byte{0x40, 0, 0x40, 0, 5})
	f.Fuzz(func(t *testing.T, before, after []byte) {
		old := newSlotTable(decodeRanges(before), nil)
		ranges := decodeRanges(after)
		tab := newSlotTable(ranges, old)
		for slot := range clusterSlots {
			want := old.masters[old.owner[slot]]
			for _, r := range ranges {
				if r.from >= 0 && r.to < clusterSlots && r.from <= int64(slot) && int64(slot) <= r.to {
					want = r.master
				}
			}
			if got := tab.masters[tab.owner[slot]]; got != want {
				t.Fatalf("slot %d: %q, want %q (ranges %v over %v)", slot, got, want, ranges, decodeRanges(before))
			}
		}
	})
}

// decodeRanges reads 5 bytes per range: from and to as signed 16-bit numbers
// (so some fall outside 0-16383), then the master's name.
func decodeRanges(b []byte) []slotRange {
	var ranges []slotRange
	for ; len(b) >= 5; b = b[5:] {
		ranges = append(ranges, slotRange{
			from:   int64(int16(binary.BigEndian.Uint16(b))),
			to:     int64(int16(binary.BigEndian.Uint16(b[2:]))),
			master: "m" + string(rune('a'+b[4]%26)),
		})
	}
	return ranges
}
