package memory

import (
	"context"

	"github.com/sluicehq/sluice"
)

var _ sluice.SlotStore = (*Store)(nil)

// A concurrency key is an entry like any other — found, bounded, swept and
// evicted the same way — whose state is its shard's slots[position]: the
// slots held, oldest first (sluice.AcquireSlot). The entry expires when the
// newest slot's lease ends, so a key whose slots have all expired is
// forgotten like a window that ended.

// slotUnits is what one slot of a set's capacity is charged, in sliding_log
// entries of logEntryBytes: its 24 bytes in the set and its 32-byte token.
// A set's capacity never exceeds MaxConcurrencyLimit, so its charge fits a
// logCapacity.
const slotUnits = 4

const _ = logCapacity(slotUnits * sluice.MaxConcurrencyLimit)

// stateAlgorithms lists every algorithm a state can be kept for, in the
// order of algorithmIndex.
var stateAlgorithms = append(sluice.Algorithms[:len(sluice.Algorithms):len(sluice.Algorithms)], sluice.Concurrency)

// AcquireSlot implements sluice.SlotStore, under the key's shard lock. A new
// key the bounds leave no room for is denied, as Decide denies one.
func (s *Store) AcquireSlot(_ context.Context, req sluice.Request) (res sluice.Result, token string, err error) {
	if req.Cost > 0 {
		token = sluice.NewSlotToken() // outside the lock
	}
	p := req.Policy
	now := s.now()
	var id entryKey
	sh, h, i, found := s.lockEntry(p, req.Key, &id)
	defer sh.mu.Unlock()
	var held []sluice.HeldSlot
	var units logCapacity
	if found {
		held, units = sh.slots[i], sh.at(i).logCap
	}
	held, res = sluice.AcquireSlot(p, held, now, "") // drops the expired slots in place
	if found {
		sh.slots[i] = held // whatever follows
	}
	if token != "" && res.Remaining > 0 && len(held) == cap(held) {
		// Grow the set before the acquisition appends to it, within the
		// bounds: to twice its size, at most Limit slots.
		grown := make([]sluice.HeldSlot, len(held), min(max(4, 2*len(held)), int(p.Limit)))
		copy(grown, held)
		held, units = grown, logCapacity(slotUnits*cap(grown))
		if found && !s.growSlots(sh, i, p, units, now, &res) {
			return res, "", nil
		}
	}
	if token != "" {
		held, res = sluice.AcquireSlot(p, held, now, token)
		if !res.Allowed {
			token = ""
		}
	}
	switch {
	case len(held) == 0: // nothing held: nothing to keep
		if found {
			sh.remove(i)
		}
	case found:
		sh.setSlots(i, p, held, &res, now, units)
	default: // a new key's first slot
		if !s.insertSlots(sh, h, &id, p, held, &res, now, units) {
			return res, "", nil
		}
	}
	return res, token, nil
}

// insertSlots stores held, a new key's slots, charged units, within the
// bounds: the exact part only, as the compact part cannot hold tokens. When
// there is no room it writes the refusal into *res and returns false.
func (s *Store) insertSlots(sh *shard, h uint64, id *entryKey, p *sluice.Policy, held []sluice.HeldSlot, res *sluice.Result, now int64, units logCapacity) bool {
	u := s.budgets.usage(p.Name)
	sh.sweep(now, sweepPerInsert)
	// Like any key seen for the first time, it may not move another to the
	// compact part to make room.
	if ok, wait := s.makeRoom(sh, u, 1, entryBytes(len(id.key), units), now, false); !ok {
		*res = s.refusal(p, wait)
		return false
	}
	var st sluice.State
	sh.insert(h, *id, u, p, &st, res, now, units)
	i, _ := sh.find(h, id)
	sh.setSlots(i, p, held, res, now, units)
	return true
}

// growSlots makes room in sh for entry i's slots to be charged units. When
// there is none it writes the refusal into *res and returns false.
func (s *Store) growSlots(sh *shard, i int32, p *sluice.Policy, units logCapacity, now int64, res *sluice.Result) bool {
	e := sh.at(i)
	e.pinned = true
	ok, wait := s.makeRoom(sh, e.usage, 0, (int64(units)-int64(e.logCap))*logEntryBytes, now, true)
	e.pinned = false
	if !ok {
		*res = s.refusal(p, wait)
	}
	return ok
}

// ReleaseSlot implements sluice.SlotStore, under the key's shard lock.
func (s *Store) ReleaseSlot(_ context.Context, p *sluice.Policy, key, token string) (bool, error) {
	now := s.now()
	var id entryKey
	sh, _, i, found := s.lockEntry(p, key, &id)
	defer sh.mu.Unlock()
	if !found {
		return false, nil
	}
	held, released := sluice.ReleaseSlot(p, sh.slots[i], now, token)
	if len(held) == 0 {
		sh.remove(i)
		return released, nil
	}
	units := sh.at(i).logCap
	if c := cap(held); c >= 16 && len(held) <= c/4 {
		// Mostly empty after a burst: give half of it back.
		shrunk := make([]sluice.HeldSlot, len(held), c/2)
		copy(shrunk, held)
		held, units = shrunk, logCapacity(slotUnits*cap(shrunk))
	}
	held, res := sluice.AcquireSlot(p, held, now, "") // the state's view, for its expiry
	sh.setSlots(i, p, held, &res, now, units)
	return released, nil
}

// lockEntry sets *id to (p, key)'s entry key, locks its shard, which the
// caller unlocks, and finds its entry: its hash, position and whether it
// exists.
func (s *Store) lockEntry(p *sluice.Policy, key string, id *entryKey) (sh *shard, h uint64, i int32, found bool) {
	id.set(p, key)
	h = s.hash(id)
	sh = &s.shards[h&s.mask]
	sh.mu.Lock()
	i, found = sh.find(h, id)
	return sh, h, i, found
}

// setSlots stores held, not empty, as entry i's slots, charged units: res is
// the decision that left them. The entry expires when the newest slot's
// lease ends.
func (sh *shard) setSlots(i int32, p *sluice.Policy, held []sluice.HeldSlot, res *sluice.Result, now int64, units logCapacity) {
	if sh.slots == nil {
		sh.slots = make(map[int32][]sluice.HeldSlot)
	}
	sh.slots[i] = held
	e := sh.at(i)
	sh.charge(e, units)
	e.expires = held[len(held)-1].At + p.Period.Microseconds()
	e.safeAt = safeAt(p, res, now, e.expires)
}
