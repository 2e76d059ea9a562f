package memory

import (
	"hash/maphash"

	"github.com/sluicehq/sluice"
)

// applyAbsent is apply for a key the exact part does not hold, under sh's
// lock: its state is the compact part's, if it holds one, else initial.
func (s *Store) applyAbsent(sh *shard, h uint64, p *sluice.Policy, id *entryKey, cost int64, consumes bool, o *op, res *sluice.Result, now int64) bool {
	var next sluice.State
	var u *usage
	cold, held := coldRef{match: -1}, false
	if sh.cold.live(now) {
		u = s.budgets.usage(p.Name)
		cold, held = s.coldRead(sh, h, u, p, id.alg, now, &next)
	}
	if o == nil {
		sluice.DecideInPlace(p, &next, now, cost, res)
	} else {
		o.run(&next, now, res)
	}
	switch {
	case res.ResetAfter == 0: // back to initial: nothing to keep
		if cold.match >= 0 {
			sh.cold.clearExpired(&s.colds, &cold, now)
		}
		return true
	case held && (o == nil && (cost == 0 || !res.Allowed) || o != nil && o.kind == opRelease):
		// A peek or a denial changes nothing. A refund is not taken back
		// from the compact part: a slot may hold another key's units too,
		// and keeping the units only counts more.
		return true
	}
	if u == nil {
		u = s.budgets.usage(p.Name)
	}
	expires := now + res.ResetAfter.Microseconds()
	if s.compactFirst {
		if _, exact, _ := encodeCold(id.alg, &next); exact && s.spill(sh, h, u, id.alg, p, &next, expires, now) {
			return true
		}
	}
	logCap := o.nextLogCap(id.alg, 0, 0, &next, res.Allowed && consumes)
	bytes := entryBytes(len(id.key), logCap)
	sh.sweep(now, sweepPerInsert)
	// A key back with an admission may move a colder key to the compact part
	// to make room for itself; a key seen for the first time may not.
	ok, wait := s.makeRoom(sh, u, 1, bytes, now, cold.match >= 0)
	if ok {
		sh.insert(h, *id, u, p, &next, res, now, logCap)
		return true
	}
	if s.spill(sh, h, u, id.alg, p, &next, expires, now) {
		if !held {
			s.spilled.Add(1)
		}
		s.pressure.note()
		return true
	}
	*res = s.refusal(p, wait)
	return false
}

// growLog makes room in sh for entry i's log to grow to logCap entries, for
// next, its state after the decision *res, and reports whether it did. When
// there is none it moves the key to the compact part, which holds the log as
// one entry of its sum (never less than the log); when that fails too it
// writes the refusal into *res and reports the decision not applied.
func (s *Store) growLog(sh *shard, i int32, h uint64, p *sluice.Policy, next *sluice.State, logCap logCapacity, now int64, res *sluice.Result) (grown, applied bool) {
	e := sh.at(i)
	bytes := (int64(logCap) - int64(e.logCap)) * logEntryBytes
	e.pinned = true
	ok, wait := s.makeRoom(sh, e.usage, 0, bytes, now, true)
	e.pinned = false
	switch {
	case ok:
		return true, true
	case s.spill(sh, h, e.usage, e.alg, p, next, now+res.ResetAfter.Microseconds(), now):
		sh.remove(i)
		s.pressure.note()
		return false, true
	}
	*res = s.refusal(p, wait)
	return false, false
}

// coldRead looks up the key of hash h under p (whose usage is u) in sh's
// compact part and writes its state into *st. The ref says where the state
// is (id 0 when the policy has none there); held whether any was found.
func (s *Store) coldRead(sh *shard, h uint64, u *usage, p *sluice.Policy, alg uint8, now int64, st *sluice.State) (r coldRef, held bool) {
	r.match = -1
	id := u.coldIDs[alg].Load()
	if id == 0 || !sh.cold.live(now) {
		return r, false
	}
	r = sh.cold.ref(h, id)
	if held = sh.cold.load(&r, p, alg, now, st); held {
		// A policy whose period grew keeps what it finds for longer.
		s.colds.get(id).observe(lifetime(p, alg))
	}
	return r, held
}

// spill keeps st, a state of alg that expires at expires, for the key of hash h
// under the policy of u in sh's compact part: for a key the exact part has no
// room for, or one it gives up. p is the policy that decided st, nil for a
// key moved there unchanged. It returns false when the store has no compact
// part, or no id left for the policy.
func (s *Store) spill(sh *shard, h uint64, u *usage, alg uint8, p *sluice.Policy, st *sluice.State, expires, now int64) bool {
	if s.coldBuckets == 0 {
		return false
	}
	id := s.colds.id(u, alg)
	if id == 0 {
		return false
	}
	if sh.cold == nil {
		sh.cold = newColdTable(s.coldBuckets)
	}
	t := sh.cold
	r := t.ref(h, id)
	c, _, ok := encodeCold(alg, st)
	if !ok { // no compact form: the floor holds it
		t.foldState(id, alg, st, r.b1, expires)
		s.folded.Add(1)
		return true
	}
	s.colds.get(id).observe(max(expires-c.time, lifetime(p, alg)))
	// st replaces the first slot the key may own only if it holds at least as
	// much under every policy of the name (another key sharing the slot may
	// have written it since st was read, and policies' numbers change), else
	// it takes a slot of its own. A window that rolled over or a log whose
	// entries left may not: its old slot then stays until it expires, and
	// reads merge the two.
	j := r.match
	if j >= 0 && !dominates(alg, c, t.state(j)) {
		j = -1
	}
	if j < 0 {
		var folded bool
		if j, folded = t.take(&s.colds, &r, now); folded {
			s.folded.Add(1)
		}
	}
	t.put(&r, j, c, max(expires, c.time+s.colds.get(id).span.Load()))
	return true
}

// lifetime bounds how long a state of alg under p lives past the time its
// compact form keeps (0 for p nil): a period for a fixed window's last
// admission and a log's newest entry, two for a sliding window's.
func lifetime(p *sluice.Policy, alg uint8) int64 {
	switch {
	case p == nil || isBucket(alg):
		return 0
	case alg == slidingWindowIndex:
		return 2 * p.Period.Microseconds()
	}
	return p.Period.Microseconds()
}

// demote moves entry pos of sh, which the compact part holds exactly (see
// entry.compact), there, and frees its room in the exact part. Nothing is
// lost: the key's next decision reads the same state from there.
func (s *Store) demote(sh *shard, pos int32, now int64) bool {
	e := sh.at(pos)
	var st sluice.State
	e.load(&st)
	if !s.spill(sh, s.entryHash(e), e.usage, e.alg, nil, &st, e.expires, now) {
		return false
	}
	s.demoted.Add(1)
	sh.remove(pos)
	return true
}

// compact reports whether the compact part holds e's state exactly. It
// never holds a concurrency key's slots: their tokens do not fit.
func (e *entry) compact() bool {
	switch e.alg {
	case concurrencyIndex:
		return false
	case slidingLogIndex:
		return e.log == nil || e.log.Len() <= 1
	case slidingWindowIndex:
		return e.count < coldCountLimit && e.prev < coldCountLimit
	case tokenBucketIndex:
		return true
	}
	return e.count >= 0 && e.count < coldSaturated // a fixed window's count, a TAT's tolerance
}

// entryHash is hash for the key e holds, without copying it out.
func (s *Store) entryHash(e *entry) uint64 {
	var kh uint64
	if n := e.key.short[shortKeyLen]; n != longKey {
		kh = maphash.Bytes(s.seed, e.key.short[:n])
	} else {
		kh = maphash.String(s.seed, e.key.long)
	}
	return s.mix(kh, e.usage.name, e.alg)
}

// dominates reports whether a holds at least as much as b under every policy
// of alg, at every instant: a is no earlier than b, and holds as much in each
// count. (For a window in a later window than b's, that is more than enough.)
func dominates(alg uint8, a, b coldState) bool {
	if a.time < b.time {
		return false
	}
	switch alg {
	case slidingWindowIndex:
		return a.x>>16 >= b.x>>16 && a.x&0xFFFF >= b.x&0xFFFF
	case fixedWindowIndex, slidingLogIndex:
		return a.x >= b.x
	}
	return true // a bucket full again no sooner
}
