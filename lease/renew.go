package lease

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
)

// pending is a reservation made ahead by a renewal, waiting for the current
// lease to be spent. Its units are used within d of start, as any lease's.
type pending struct {
	policy sluice.Policy
	res    sluice.Reservation
	asked  int64
	start  int64 // node clock (µs) read before the reservation
	ttl    time.Duration
}

// expires is when the pending lease would end: its TTL, or its window's end.
func (p *pending) expires() int64 {
	end := p.start + p.ttl.Microseconds()
	if p.policy.Algorithm == sluice.FixedWindow {
		end = min(end, p.start+p.res.Result.ResetAfter.Microseconds())
	}
	return end
}

// giveBack is what p holds for the store: nothing once its fixed window is over.
func (p *pending) giveBack(now int64) giveBack {
	if p.policy.Algorithm == sluice.FixedWindow && now >= p.start+p.res.Result.ResetAfter.Microseconds() {
		return giveBack{}
	}
	return giveBack{policy: p.policy, key: "", res: p.res, at: p.start, unused: p.res.Granted}
}

// wantsRenewal says whether a renewal should start now, after an admission
// from l (its shard locked): when its units would run out, at the rate it is
// spending them, within lead µs (twice a reservation's measured latency), or
// (the buckets) its TTL ends within lead. One renewal per lease, none when a
// fixed window would end first (the units would be stranded in it).
func (l *lease) wantsRenewal(now, lead int64) bool {
	if lead <= 0 || l.renewTried || l.next != nil || l.res.Granted == 0 || now < l.deniedUntil {
		return false
	}
	if l.policy.Algorithm == sluice.FixedWindow {
		if now+lead >= l.windowEnd {
			return false
		}
	} else if l.expires-now <= lead {
		l.renewTried = true
		return true
	}
	if l.left*max(1, now-l.start) > l.spent*lead {
		return false
	}
	l.renewTried = true
	return true
}

// held is what l holds unused at now (shard locked): the current lease's
// units until it expires, and a pending renewal's until it would.
func (l *lease) held(now int64) int64 {
	var n int64
	if now < l.expires {
		n = l.left
	}
	if l.next != nil && now < l.next.expires() {
		n += l.next.res.Granted
	}
	return n
}

// promote makes the pending lease current, when there is one and it has not
// expired (shard locked). An expired one is dropped: what it held is returned.
func (l *lease) promote(now int64) (bool, giveBack) {
	n := l.next
	if n == nil {
		return false, giveBack{}
	}
	l.next = nil
	if now >= n.expires() {
		return false, l.withKey(n.giveBack(now))
	}
	l.install(n.res, n.asked, n.start, n.ttl)
	l.watch()
	return true, giveBack{}
}

// dropNext forgets the pending lease (shard locked) and returns what it held.
func (l *lease) dropNext(now int64) giveBack {
	n := l.next
	if n == nil {
		return giveBack{}
	}
	l.next = nil
	return l.withKey(n.giveBack(now))
}

func (l *lease) withKey(g giveBack) giveBack {
	if g.unused > 0 {
		g.key = l.id.key
	}
	return g
}

// renew reserves l's next lease while decisions keep spending the current
// one, so that a key's steady decisions never wait for the store. It holds
// l.mu across the call, as a reservation made by a request does: one
// reservation per key at a time. A renewal that fails or is denied installs
// nothing; the next request that finds the lease spent asks the store itself.
func (s *Store) renew(ctx context.Context, l *lease) {
	defer s.background.Add(-1)
	// The decisions that wait for l.mu wait for this renewal: its calls
	// share one budget, as a decision's do (see reserve).
	ctx = failover.MarkStart(context.WithoutCancel(ctx), time.Now())
	l.mu.Lock()
	defer l.mu.Unlock()
	sh := l.sh
	sh.mu.Lock()
	if l.retired || l.next != nil {
		sh.mu.Unlock()
		return
	}
	p := l.policy
	now := s.now()
	ttl, maxLease := s.ttlOf(&p), s.maxLeaseOf(&p)
	// What the node holds stays within one max lease (Stranded).
	room := maxLease - l.left
	if room < 1 {
		sh.mu.Unlock()
		return
	}
	size := min(l.nextSize(1, now, maxLease, ttl), room)
	sh.mu.Unlock()

	r, err := s.timedReserve(ctx, sluice.Request{Policy: &p, Key: l.id.key, Cost: 1}, size, now)
	if err != nil || r.Result.Degraded || r.Granted == 0 {
		return
	}
	sh.mu.Lock()
	if l.retired || l.policy != p {
		sh.mu.Unlock()
		s.giveBack(ctx, giveBack{policy: p, key: l.id.key, res: r, at: now, unused: r.Granted})
		return
	}
	l.next = &pending{policy: p, res: r, asked: size, start: now, ttl: ttl}
	sh.mu.Unlock()
	s.renewals.Add(1)
}

// startRenewal runs renew for l in the background.
func (s *Store) startRenewal(ctx context.Context, l *lease) {
	s.background.Add(1)
	go s.renew(ctx, l)
}

// giveBackLater gives g back in the background: a decision that a renewal
// took over does not wait for the release of the expired lease's units.
func (s *Store) giveBackLater(ctx context.Context, g giveBack) {
	if g.unused <= 0 {
		return
	}
	s.background.Add(1)
	go s.giveBackInBackground(context.WithoutCancel(ctx), g)
}

func (s *Store) giveBackInBackground(ctx context.Context, g giveBack) {
	defer s.background.Add(-1)
	s.giveBack(ctx, g)
}

// takeOver makes the renewal current for a request under p (shard locked)
// when the current lease cannot serve: it is spent or has expired. It
// returns what the old lease held, to give back.
func (l *lease) takeOver(p *sluice.Policy, now int64) (giveBack, bool) {
	if l.next == nil || *p != l.policy || now >= l.next.expires() || l.left > 0 && now < l.expires {
		return giveBack{}, false
	}
	back := l.takeBack(now)
	l.promote(now)
	return back, true
}

// timedReserve makes a reservation read at now and keeps a moving average of
// how long reservations take, by the store's clock: the lead of a renewal.
func (s *Store) timedReserve(ctx context.Context, req sluice.Request, size, now int64) (sluice.Reservation, error) {
	s.storeCalls.Add(1)
	r, err := s.reserver.Reserve(ctx, req, size)
	if err == nil {
		took := max(0, s.now()-now)
		avg := took // the first sets it
		if old := s.reserveMicros.Load(); old > 0 {
			avg = old + (took-old)/8
		}
		s.reserveMicros.Store(avg)
	}
	return r, err
}

// renewLead is how long before a lease runs out a renewal starts (µs).
func (s *Store) renewLead() int64 { return 2 * s.reserveMicros.Load() }
