package lease

import "time"

// keyLock is held by the one caller reserving for a key (and by a sweep or
// Close giving its lease back), across the store calls. Unlike a sync.Mutex,
// a wait for it can end: behind a stalled store, a decision waits for its
// key's reservation in flight at most what is left of its time budget, not
// for that reservation and then for the next one a newcomer started.
type keyLock chan struct{}

func newKeyLock() keyLock { return make(keyLock, 1) }

func (k keyLock) Lock()   { k <- struct{}{} }
func (k keyLock) Unlock() { <-k }

// TryLock takes the lock when it is free, without waiting.
func (k keyLock) TryLock() bool {
	select {
	case k <- struct{}{}:
		return true
	default:
		return false
	}
}

// LockBefore waits for the lock until deadline (forever when it is zero) and
// reports whether it got it.
func (k keyLock) LockBefore(deadline time.Time) bool {
	if deadline.IsZero() {
		k.Lock()
		return true
	}
	if k.TryLock() {
		return true
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case k <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}
