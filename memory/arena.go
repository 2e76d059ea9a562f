package memory

import (
	"math"
	"sync"
)

// arena holds every shard's entries, store-wide, in the order keys arrive.
//
// Why one arena rather than an entries slice per shard: a store has many
// shards so that cores rarely wait on one lock, and a key's shard is picked
// by its hash. With a slice per shard, keys stored one after another land in
// as many places as there are shards, so keys used in the order they were
// stored (a batch job, a scan, a client cycling through its tenants) read
// memory from dozens of streams at once, more than a CPU's prefetcher
// follows. From one arena they read it in sequence, as a Go map of pointers
// to per-key objects does. Random order costs the same either way.
//
// An entry never moves: a position is the entry's for as long as its key is
// held, and only the shard that allocated it touches it (under its lock).
// A removed entry's position goes to its shard's free list, so the arena
// holds at most as many entries as the shards have held at their fullest,
// which the bounds limit. Each shard also lists the positions it holds, in
// the order its sweep and eviction sample visit them.
type arena struct {
	mu     sync.Mutex
	chunks []*chunk // never holes; appended to under mu
	next   int64    // the first position never handed out
}

const (
	chunkShift = 8
	chunkLen   = 1 << chunkShift // entries per chunk: 25 KiB
	chunkMask  = chunkLen - 1
	// maxPositions keeps a position within the index's 32 bits. New caps
	// the keys a store holds at it, so the arena never runs out.
	maxPositions = math.MaxInt32
)

// chunk is a run of the arena's positions: their entries, and where each
// position is in its shard's owned list.
type chunk struct {
	entries  [chunkLen]entry
	listedAt [chunkLen]int32
}

// fresh hands out a position never used before, and the chunks that hold
// it. The slice it returns is the caller's to keep: chunks are only ever
// appended, past the length the caller sees.
func (a *arena) fresh() (int32, []*chunk) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= maxPositions {
		panic("memory: arena positions exhausted") // the key bounds make this unreachable
	}
	pos := a.next
	a.next++
	for int64(len(a.chunks)) <= pos>>chunkShift {
		a.chunks = append(a.chunks, new(chunk))
	}
	return int32(pos), a.chunks
}

// at returns the entry at pos, which the shard holds.
func (sh *shard) at(pos int32) *entry {
	return &sh.chunks[pos>>chunkShift].entries[pos&chunkMask]
}

// take returns a position for a new entry, listed as the shard's: one the
// shard freed if it has any, else a fresh one.
func (sh *shard) take() int32 {
	var pos int32
	if n := len(sh.free); n > 0 {
		pos = sh.free[n-1]
		sh.free = sh.free[:n-1]
	} else {
		pos, sh.chunks = sh.arena.fresh()
	}
	sh.chunks[pos>>chunkShift].listedAt[pos&chunkMask] = int32(len(sh.owned))
	sh.owned = append(sh.owned, pos)
	return pos
}

// give frees the shard's position pos: the last one listed takes its place
// in the list, so that the newest is visited last by the next pass.
func (sh *shard) give(pos int32) {
	i, last := sh.chunks[pos>>chunkShift].listedAt[pos&chunkMask], sh.owned[len(sh.owned)-1]
	sh.owned[i] = last
	sh.chunks[last>>chunkShift].listedAt[last&chunkMask] = i
	sh.owned = sh.owned[:len(sh.owned)-1]
	sh.free = append(sh.free, pos)
}
