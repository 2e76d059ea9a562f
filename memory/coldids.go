package memory

import (
	"sync"
	"sync/atomic"
)

// maxColdIDs is how many (policy name, algorithm) pairs the compact part tells
// apart: a slot holds the id in 16 bits. A policy that comes after them has no
// compact state, and its new keys are denied when the exact part is full, as
// before the compact part existed.
const maxColdIDs = 1<<16 - 1

// coldIDs numbers the (policy name, algorithm) pairs whose states the compact
// part holds. A slot keeps the number, not the name, so that only keys of one
// policy ever share a slot (see coldTable), and looks up by it what kind of
// state it holds and how long such a state lives.
type coldIDs struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*coldPolicy] // id-1 → its policy; only appended to
}

// coldPolicy is what the compact part knows of one id's states.
type coldPolicy struct {
	alg uint8 // algorithmIndex
	// span bounds how long a state lives past its time (its expiry minus the
	// time a slot keeps) under every policy of the name that read or wrote
	// one: the longest seen, so a slot is never taken back while its state
	// may still count. 0 for the buckets, whose time is their expiry.
	span atomic.Int64
}

// id returns u's id for alg, numbering it on first use; 0 when every id is
// taken.
func (c *coldIDs) id(u *usage, alg uint8) uint32 {
	if id := u.coldIDs[alg].Load(); id != 0 {
		return id
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id := u.coldIDs[alg].Load(); id != 0 {
		return id
	}
	var list []*coldPolicy
	if old := c.list.Load(); old != nil {
		list = *old
	}
	if len(list) >= maxColdIDs {
		return 0
	}
	list = append(list[:len(list):len(list)], &coldPolicy{alg: alg}) // readers keep the old slice
	c.list.Store(&list)
	id := uint32(len(list))
	u.coldIDs[alg].Store(id)
	return id
}

// get returns the policy of id, which id handed out.
func (c *coldIDs) get(id uint32) *coldPolicy { return (*c.list.Load())[id-1] }

// observe records that a state of this id lives up to span past its time.
func (cp *coldPolicy) observe(span int64) {
	for {
		old := cp.span.Load()
		if span <= old || cp.span.CompareAndSwap(old, span) {
			return
		}
	}
}
