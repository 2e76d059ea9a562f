package memory

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// Keys whose 64-bit hashes collide are kept apart (the index probes on and
// compares the entries), and removing either one (in any order, with index
// slots shifting back) keeps the other findable.
func TestShardHashCollisions(t *testing.T) {
	// Short keys live in the entry; long ones here share the bytes held
	// there and differ only in the copy of the whole key.
	for _, prefix := range []string{"k", "a-prefix-longer-than-the-inline-part/"} {
		for _, removeFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/removeFirst=%v", prefix, removeFirst), func(t *testing.T) {
				testShardHashCollisions(t, prefix, removeFirst)
			})
		}
	}
}

func testShardHashCollisions(t *testing.T, prefix string, removeFirst bool) {
	sh := newTestShard()
	u := &usage{name: "p"}
	p := &sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	res := sluice.Result{ResetAfter: 1000}
	const h = 42 << 32
	ids := make([]entryKey, 5)
	for i := range ids {
		ids[i] = entryKey{policy: "p", key: fmt.Sprint(prefix, i)}
		hash := uint64(h)
		if i >= 3 {
			hash = uint64(100+i) << 32 // bystanders with their own tags
		}
		sh.insert(hash, ids[i], u, p, &sluice.State{Time: int64(i + 1)}, &res, 0, 0)
	}
	find := func(i int) (sluice.State, bool) {
		hash := uint64(h)
		if i >= 3 {
			hash = uint64(100+i) << 32
		}
		j, ok := sh.find(hash, &ids[i])
		var st sluice.State
		if ok {
			sh.at(j).load(&st)
		}
		return st, ok
	}
	for i := range ids {
		if st, ok := find(i); !ok || st.Time != int64(i+1) {
			t.Fatalf("key %d: found=%v state %+v", i, ok, st)
		}
	}
	victim := 1 // the second in the probe sequence
	if removeFirst {
		victim = 0 // the first, whose slot the others shift into
	}
	j, _ := sh.find(h, &ids[victim])
	sh.remove(j)
	for i := range ids {
		st, ok := find(i)
		if i == victim {
			if ok {
				t.Fatalf("removed key %d still found", i)
			}
			continue
		}
		if !ok || st.Time != int64(i+1) {
			t.Fatalf("after removing %d: key %d found=%v state %+v", victim, i, ok, st)
		}
	}
}

// An entry spans two cache lines, never three (see entry).
func TestEntrySize(t *testing.T) {
	if size := unsafe.Sizeof(entry{}); size != 96 {
		t.Fatalf("an entry takes %d bytes, want 96", size)
	}
}

// newTestShard is a shard on an arena of its own.
func newTestShard() *shard { return &shard{arena: new(arena)} }

// entriesOf returns the shard's entries.
func entriesOf(sh *shard) []*entry {
	var es []*entry
	for _, pos := range sh.owned {
		es = append(es, sh.at(pos))
	}
	return es
}
