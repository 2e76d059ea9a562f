package memory

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/storetest"
)

// Keys stored one after another take consecutive positions in the arena,
// whichever shards they fall in: that is what the arena is for.
func TestArenaKeepsArrivalOrder(t *testing.T) {
	s := New(WithClock(storetest.NewClock(storetest.Epoch)))
	if len(s.shards) < 2 {
		t.Fatalf("%d shards: the test needs several", len(s.shards))
	}
	p := &sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute}
	shardsUsed := map[uint64]bool{}
	for i := range 1000 {
		key := "k" + strconv.Itoa(i)
		if _, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: key, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		var id entryKey
		id.set(p, key)
		h := s.hash(&id)
		shardsUsed[h&s.mask] = true
		pos, ok := s.shards[h&s.mask].find(h, &id)
		if !ok || pos != int32(i) {
			t.Fatalf("key %d: at position %d (found %v), want %d", i, pos, ok, i)
		}
	}
	if len(shardsUsed) < len(s.shards)/2 {
		t.Fatalf("1000 keys fell in %d of %d shards", len(shardsUsed), len(s.shards))
	}
}

// Shards sharing an arena through any sequence of insertions and removals:
// no position is held twice, each shard's list of positions agrees with its
// index and with where each position says it is listed, and freed positions
// are taken again before the arena grows.
func TestArenaPositions(t *testing.T) {
	a := new(arena)
	shards := make([]shard, 4)
	for i := range shards {
		shards[i].arena = a
	}
	u := &usage{name: "p"}
	p := &sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	res := sluice.Result{ResetAfter: 1000}
	rng := rand.New(rand.NewPCG(1, 2))
	held := map[string]bool{}
	peaks := make([]int, len(shards)) // the most keys each shard held at once
	for step := range 20_000 {
		n := rng.IntN(700)
		key := "k" + strconv.Itoa(n)
		h := uint64(n) * 0x9e3779b97f4a7c15
		si := n % len(shards)
		sh := &shards[si]
		var id entryKey
		id.set(p, key)
		pos, found := sh.find(h, &id)
		switch {
		case found:
			sh.remove(pos)
			delete(held, key)
		default:
			sh.insert(h, id, u, p, &sluice.State{Time: int64(step + 1)}, &res, 0, 0)
			held[key] = true
		}
		peaks[si] = max(peaks[si], len(sh.owned))
		if step%1000 == 0 || step == 19_999 {
			checkArena(t, step, a, shards, len(held))
		}
	}
	for si, n := range peaks {
		if n == 0 {
			t.Fatalf("shard %d never held a key: the test shares the arena among fewer shards than it says", si)
		}
	}
	// A shard takes a fresh position only when it holds more keys than ever
	// before: the arena never outgrows the sum of the shards' peaks.
	sum := 0
	for _, n := range peaks {
		sum += n
	}
	if a.next != int64(sum) {
		t.Fatalf("the arena handed out %d positions; the shards' peaks add up to %d", a.next, sum)
	}
}

func checkArena(t *testing.T, step int, a *arena, shards []shard, want int) {
	t.Helper()
	seen := map[int32]bool{}
	total := 0
	for si := range shards {
		sh := &shards[si]
		if len(sh.owned) != sh.index.used {
			t.Fatalf("step %d shard %d: lists %d positions, indexes %d", step, si, len(sh.owned), sh.index.used)
		}
		for i, pos := range sh.owned {
			if seen[pos] {
				t.Fatalf("step %d: position %d held twice", step, pos)
			}
			seen[pos] = true
			if got := sh.chunks[pos>>chunkShift].listedAt[pos&chunkMask]; got != int32(i) {
				t.Fatalf("step %d shard %d: position %d listed at %d says %d", step, si, pos, i, got)
			}
			if e := sh.at(pos); e.time == 0 {
				t.Fatalf("step %d shard %d: position %d holds no entry", step, si, pos)
			}
		}
		for _, pos := range sh.free {
			if seen[pos] {
				t.Fatalf("step %d: position %d both held and free", step, pos)
			}
			seen[pos] = true
		}
		total += len(sh.owned)
	}
	if total != want {
		t.Fatalf("step %d: shards hold %d keys, want %d", step, total, want)
	}
	if int64(len(seen)) != a.next {
		t.Fatalf("step %d: %d positions held or free, %d handed out", step, len(seen), a.next)
	}
}
