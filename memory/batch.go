package memory

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
)

// batchItem is one request of a DecideAll in progress.
type batchItem struct {
	id        entryKey
	hash      uint64
	shard     *shard
	found     bool
	held      bool // the compact part held its state
	spill     bool // no room in the exact part: it goes to the compact part
	old, next sluice.State
	oldCap    logCapacity // capacity of old's log buffer
	logCap    logCapacity // capacity of next's
	u         *usage
	needKeys  int
	needBytes int64
}

// DecideAll implements sluice.Store: it locks every shard involved (in index
// order, so concurrent batches cannot deadlock), decides each request on the
// current state (the exact part's, else the compact part's), makes room for
// every new state, and commits only if all were admitted. A new state the
// exact part has no room for goes to the compact part.
func (s *Store) DecideAll(_ context.Context, reqs []sluice.Request, results []sluice.Result) error {
	now := s.now()
	b := make([]batchItem, len(reqs))
	locked := make([]int, 0, len(reqs))
	for i, r := range reqs {
		it := &b[i]
		it.id.set(r.Policy, r.Key)
		it.hash = s.hash(&it.id)
		it.shard = &s.shards[it.hash&s.mask]
		locked = insertSorted(locked, int(it.hash&s.mask))
	}
	for _, k := range locked {
		s.shards[k].mu.Lock()
	}
	defer s.pressure.report(s, now) // deferred first, so it runs after the unlocking
	defer func() {
		for _, k := range locked {
			s.shards[k].mu.Unlock()
		}
	}()

	allowed := true
	var retry time.Duration
	for i, r := range reqs {
		it := &b[i]
		if j, ok := it.shard.find(it.hash, &it.id); ok {
			it.found = true
			e := it.shard.at(j)
			e.load(&it.old)
			it.oldCap = e.logCap
		} else if it.shard.cold.live(now) {
			it.u = s.budgets.usage(r.Policy.Name)
			_, it.held = s.coldRead(it.shard, it.hash, it.u, r.Policy, it.id.alg, now, &it.old)
		}
		it.next, results[i] = sluice.Decide(r.Policy, it.old, now, r.Cost)
		if !results[i].Allowed {
			allowed = false
			retry = max(retry, results[i].RetryAfter)
		}
	}
	if !allowed {
		denyAll(reqs, b, results, now, retry)
		return nil
	}
	pinBatch(b, true)
	defer pinBatch(b, false)
	if ok, wait := s.makeBatchRoom(reqs, b, results, now); !ok {
		r := s.refusal(reqs[0].Policy, wait)
		denyAll(reqs, b, results, now, r.RetryAfter)
		return nil
	}
	for i, r := range reqs {
		it := &b[i]
		j, found := it.shard.find(it.hash, &it.id)
		switch {
		case results[i].ResetAfter == 0:
			if found {
				it.shard.remove(j)
			}
		case found:
			it.shard.update(j, r.Policy, &it.next, &results[i], now, it.logCap)
		case it.held && r.Cost == 0: // a peek changes nothing
		case it.spill:
			s.spill(it.shard, it.hash, it.u, it.id.alg, r.Policy, &it.next, now+results[i].ResetAfter.Microseconds(), now)
			if !it.held {
				s.spilled.Add(1)
			}
			s.pressure.note()
		default:
			it.shard.insert(it.hash, it.id, it.u, r.Policy, &it.next, &results[i], now, it.logCap)
		}
	}
	return nil
}

// denyAll answers a batch that is not admitted. Nothing is consumed: each
// limit is reported as it stands (a peek), with the wait after which the whole
// batch passes.
func denyAll(reqs []sluice.Request, b []batchItem, results []sluice.Result, now int64, retry time.Duration) {
	for i, r := range reqs {
		_, results[i] = sluice.Decide(r.Policy, b[i].old, now, 0)
		results[i].Allowed = false
		results[i].RetryAfter = retry
	}
}

// pinBatch marks (or unmarks) the batch's existing entries so that making room
// for one request never evicts another's.
func pinBatch(b []batchItem, pinned bool) {
	for i := range b {
		if j, ok := b[i].shard.find(b[i].hash, &b[i].id); ok {
			b[i].shard.at(j).pinned = pinned
		}
	}
}

// makeBatchRoom makes room for every new key and grown log of an admitted
// batch, counting what earlier requests on the same shard will add.
func (s *Store) makeBatchRoom(reqs []sluice.Request, b []batchItem, results []sluice.Result, now int64) (bool, int64) {
	for i, r := range reqs {
		it := &b[i]
		if results[i].ResetAfter == 0 || it.held && r.Cost == 0 {
			continue
		}
		it.logCap = nextLogCap(it.id.alg, it.oldCap, it.old.Log.Len(), &it.next, r.Cost > 0)
		it.needBytes = entryBytes(len(it.id.key), it.logCap)
		if j, ok := it.shard.find(it.hash, &it.id); ok {
			e := it.shard.at(j)
			it.u = e.usage
			it.needBytes -= entryBytes(e.key.len(), e.logCap)
		} else {
			if it.u == nil {
				it.u = s.budgets.usage(r.Policy.Name)
			}
			it.needKeys = 1
			it.shard.sweep(now, sweepPerInsert)
		}
		if it.needKeys == 0 && it.needBytes <= 0 {
			continue
		}
		keys, bytes := 0, int64(0)
		for j := range b[:i+1] {
			if b[j].shard == it.shard {
				keys += b[j].needKeys
				bytes += max(0, b[j].needBytes)
			}
		}
		// A key in use (held, or back from the compact part) may move a
		// colder key there to make room for itself.
		if ok, wait := s.makeRoom(it.shard, it.u, keys, bytes, now, it.found || it.held); !ok {
			if it.found || s.coldBuckets == 0 || s.colds.id(it.u, it.id.alg) == 0 {
				return false, wait // a log that cannot grow, or no compact part: refused
			}
			it.spill, it.needKeys, it.needBytes = true, 0, 0
		}
	}
	return true, 0
}
