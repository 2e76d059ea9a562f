package memory

import (
	"fmt"
	"testing"
)

// One key's states under many policies must spread over the index: names
// that differ in one byte anywhere, or only in length, or only in the
// algorithm, get different hashes, and different tags.
func TestHashSpreadsPolicies(t *testing.T) {
	s := New()
	var ids []entryKey
	for i := range 1000 { // the digits sit in the middle, the ends alike
		ids = append(ids, entryKey{policy: fmt.Sprintf("tenant-%04d-per-minute-api", i), key: "user-1"})
	}
	for n := 1; n <= 40; n++ { // every length, each a prefix of the next
		ids = append(ids, entryKey{policy: "abcdefghijklmnopqrstuvwxyz0123456789ABCD"[:n], key: "user-1"})
	}
	for alg := range uint8(6) {
		ids = append(ids, entryKey{policy: "api", alg: alg, key: "user-1"})
	}
	hashes, tags, sharedTags := map[uint64]entryKey{}, map[uint32]entryKey{}, 0
	for _, id := range ids {
		h := s.hash(&id)
		if other, ok := hashes[h]; ok {
			t.Fatalf("%+v and %+v share the hash %#x", id, other, h)
		}
		hashes[h] = id
		if other, ok := tags[tagOf(h)]; ok {
			// A pair in 32 bits happens about once in 8,000 seeds; more is a
			// mix that does not spread.
			if sharedTags++; sharedTags > 1 {
				t.Errorf("%+v and %+v share the tag %#x", id, other, tagOf(h))
			}
		}
		tags[tagOf(h)] = id
	}
}
